// flash_attention's kernels on the GPU: the CPU's algorithm (ops/cpu/flash_attention.cpp),
// one thread per query row (forward, dq) or key row (dk, dv), the same Philox draws.
// Not yet tiled in shared memory: correct first, checked against the CPU by gpu-check.
#include <cmath>
#include <cstdint>

#include "flash_attention_launch.h"
#include "kernel_errors.h"
#include "loom/cuda/launch.h"
#include "loom/philox.h"

namespace loom::cuda {

namespace {

template <typename T>
__device__ T score(const AttentionCall& c, int64_t b, int64_t i, int64_t j) {
  const T* qi = static_cast<const T*>(c.q) + (b * c.queries + i) * c.depth;
  const T* kj = static_cast<const T*>(c.k) + (b * c.keys + j) * c.depth;
  T s = 0;
  for (int64_t d = 0; d < c.depth; ++d) s += qi[d] * kj[d];
  s *= static_cast<T>(c.scale);
  if (!c.mask) return s;
  int64_t at = c.mask_offset + i * c.row_stride + j * c.col_stride, rest = b;
  for (int d = c.batch_dims - 1; d >= 0; --d) {
    at += rest % c.batch_size[d] * c.batch_stride[d];
    rest /= c.batch_size[d];
  }
  if (c.additive) return s + static_cast<const T*>(c.mask)[at];
  return static_cast<const bool*>(c.mask)[at] ? -INFINITY : s;
}

template <typename T>
__device__ T keep(const AttentionCall& c, int64_t b, int64_t i, int64_t j) {
  if (c.dropout_p <= 0) return 1;
  const uint64_t element = static_cast<uint64_t>((b * c.queries + i) * c.keys + j);
  const Philox4x32 bits = philox_block(c.seed, c.offset + (c.offset_base ? *c.offset_base : 0), element / 4);
  const uint32_t threshold = static_cast<uint32_t>(ceil(c.dropout_p * 16777216.0));
  return (bits.v[element % 4] >> 8) >= threshold ? static_cast<T>(1.0 / (1.0 - c.dropout_p)) : T(0);
}

template <typename T>
__global__ void attention_kernel(AttentionCall c, T* out, T* lse) {
  const int64_t r = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (r >= c.batches * c.queries) return;
  const int64_t b = r / c.queries, i = r % c.queries;
  T* o = out + r * c.value_depth;
  for (int64_t d = 0; d < c.value_depth; ++d) o[d] = 0;
  T running_max = -INFINITY, sum = 0;
  for (int64_t j = 0; j < c.keys; ++j) {
    const T s = score<T>(c, b, i, j);
    if (s == -INFINITY) continue;
    const T new_max = s > running_max ? s : running_max;
    const T rescale = exp(running_max - new_max), p = exp(s - new_max);
    sum = sum * rescale + p;
    const T w = p * keep<T>(c, b, i, j);
    const T* vj = static_cast<const T*>(c.v) + (b * c.keys + j) * c.value_depth;
    for (int64_t d = 0; d < c.value_depth; ++d) o[d] = o[d] * rescale + w * vj[d];
    running_max = new_max;
  }
  if (sum > 0) {
    for (int64_t d = 0; d < c.value_depth; ++d) o[d] /= sum;
    lse[r] = running_max + log(sum);
  } else {
    lse[r] = -INFINITY;
  }
}

// dS_ij and P_ij Z_ij of weight (b, i, j); false where the weight is 0.
template <typename T>
__device__ bool gradients(const AttentionCall& c, const T* grad, const T* lse, const T* row_dot, int64_t b, int64_t i,
                          int64_t j, T& ds, T& dropped) {
  const int64_t r = b * c.queries + i;
  if (lse[r] == -INFINITY) return false;
  const T p = exp(score<T>(c, b, i, j) - lse[r]);
  if (p == 0) return false;
  const T z = keep<T>(c, b, i, j);
  const T* gi = grad + r * c.value_depth;
  const T* vj = static_cast<const T*>(c.v) + (b * c.keys + j) * c.value_depth;
  T dp = 0;
  for (int64_t d = 0; d < c.value_depth; ++d) dp += gi[d] * vj[d];
  dropped = p * z;
  ds = p * (z * dp - row_dot[r]);
  return true;
}

template <typename T>
__global__ void attention_dq_kernel(AttentionCall c, T* dq, const T* grad, const T* out, const T* lse, T* row_dot) {
  const int64_t r = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (r >= c.batches * c.queries) return;
  const int64_t b = r / c.queries, i = r % c.queries;
  T dot = 0;
  for (int64_t d = 0; d < c.value_depth; ++d) dot += grad[r * c.value_depth + d] * out[r * c.value_depth + d];
  row_dot[r] = dot;
  T* dqi = dq + r * c.depth;
  for (int64_t d = 0; d < c.depth; ++d) dqi[d] = 0;
  for (int64_t j = 0; j < c.keys; ++j) {
    T ds, dropped;
    if (!gradients<T>(c, grad, lse, row_dot, b, i, j, ds, dropped)) continue;
    const T* kj = static_cast<const T*>(c.k) + (b * c.keys + j) * c.depth;
    for (int64_t d = 0; d < c.depth; ++d) dqi[d] += ds * static_cast<T>(c.scale) * kj[d];
  }
}

template <typename T>
__global__ void attention_dkv_kernel(AttentionCall c, T* dk, T* dv, const T* grad, const T* lse, const T* row_dot) {
  const int64_t col = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (col >= c.batches * c.keys) return;
  const int64_t b = col / c.keys, j = col % c.keys;
  T* dkj = dk + col * c.depth;
  T* dvj = dv + col * c.value_depth;
  for (int64_t d = 0; d < c.depth; ++d) dkj[d] = 0;
  for (int64_t d = 0; d < c.value_depth; ++d) dvj[d] = 0;
  for (int64_t i = 0; i < c.queries; ++i) {
    T ds, dropped;
    if (!gradients<T>(c, grad, lse, row_dot, b, i, j, ds, dropped)) continue;
    const T* qi = static_cast<const T*>(c.q) + (b * c.queries + i) * c.depth;
    const T* gi = grad + (b * c.queries + i) * c.value_depth;
    for (int64_t d = 0; d < c.depth; ++d) dkj[d] += ds * static_cast<T>(c.scale) * qi[d];
    for (int64_t d = 0; d < c.value_depth; ++d) dvj[d] += dropped * gi[d];
  }
}

}  // namespace

template <typename T>
void launch_attention(const AttentionCall& call, void* out, void* lse, cudaStream_t stream) {
  const int64_t rows = call.batches * call.queries;
  if (rows == 0) return;
  attention_kernel<T><<<blocks_for(rows), kThreads, 0, stream>>>(call, static_cast<T*>(out), static_cast<T*>(lse));
  check_kernel_launch("attention_kernel");
}

template <typename T>
void launch_attention_backward(const AttentionCall& call, void* dq, void* dk, void* dv, const void* grad,
                               const void* out, const void* lse, void* row_dot, cudaStream_t stream) {
  const int64_t rows = call.batches * call.queries, cols = call.batches * call.keys;
  if (rows > 0) {
    attention_dq_kernel<T><<<blocks_for(rows), kThreads, 0, stream>>>(
        call, static_cast<T*>(dq), static_cast<const T*>(grad), static_cast<const T*>(out), static_cast<const T*>(lse),
        static_cast<T*>(row_dot));
    check_kernel_launch("attention_dq_kernel");
  }
  if (cols > 0) {
    attention_dkv_kernel<T><<<blocks_for(cols), kThreads, 0, stream>>>(
        call, static_cast<T*>(dk), static_cast<T*>(dv), static_cast<const T*>(grad), static_cast<const T*>(lse),
        static_cast<const T*>(row_dot));
    check_kernel_launch("attention_dkv_kernel");
  }
}

template void launch_attention<float>(const AttentionCall&, void*, void*, cudaStream_t);
template void launch_attention<double>(const AttentionCall&, void*, void*, cudaStream_t);
template void launch_attention_backward<float>(const AttentionCall&, void*, void*, void*, const void*, const void*,
                                               const void*, void*, cudaStream_t);
template void launch_attention_backward<double>(const AttentionCall&, void*, void*, void*, const void*, const void*,
                                                const void*, void*, cudaStream_t);

}  // namespace loom::cuda
