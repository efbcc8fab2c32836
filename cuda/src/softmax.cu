// Softmax, log_softmax and their backward: one block per row (grid-stride over
// rows), the row's max and sums through block_combine in double.
#include <cmath>
#include <cstdint>

#include <type_traits>

#include "block_reduce.cuh"
#include "loom/bfloat16.h"
#include "kernel_errors.h"
#include "rows_launch.h"

namespace loom::cuda {

namespace {

// x's logit j of row r after masking, in C: x + mask (of x's dtype T), or -inf where a
// bool mask is true.
template <typename T, typename C>
__device__ C masked_logit(C x, const RowMaskArgs& m, const char* mask_row, int64_t j) {
  if (m.kind == RowMaskArgs::additive) return x + C(reinterpret_cast<const T*>(mask_row)[j * m.step]);
  if (m.kind == RowMaskArgs::boolean)
    return reinterpret_cast<const unsigned char*>(mask_row)[j * m.step] ? C(-INFINITY) : x;
  return x;
}

template <typename T>
__device__ const char* mask_row(const RowMaskArgs& m, int64_t r) {
  if (m.kind == RowMaskArgs::none) return nullptr;
  const int64_t element = m.kind == RowMaskArgs::boolean ? 1 : sizeof(T);
  return static_cast<const char*>(m.data) + walk_offset(r, m.outer_ndim, m.outer_sizes, m.outer_strides) * element;
}

// C = compute_type<T>: a bfloat16 row is computed on in float32 and each output rounded
// once, as on the CPU; its logits are computed again in each pass (stored in the
// bfloat16 output they would be rounded).
template <typename T, typename C = compute_type<T>>
__global__ void softmax_kernel(Rows s, T* out, const T* x, RowMaskArgs m, bool log_output) {
  constexpr bool kKeepLogits = std::is_same_v<T, C>;
  __shared__ double scratch[kMaxBlockThreads];
  const int64_t n = s.size;
  for (int64_t r = blockIdx.x; r < s.rows; r += gridDim.x) {
    const T* xr = x + r * n;
    T* yr = out + r * n;
    const char* mr = mask_row<T>(m, r);
    auto logit = [&](int64_t j) -> C {
      if constexpr (kKeepLogits)
        return yr[j];
      else
        return masked_logit<T>(C(xr[j]), m, mr, j);
    };
    double mx = -INFINITY;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
      const C z = masked_logit<T>(C(xr[j]), m, mr, j);
      if constexpr (kKeepLogits) yr[j] = z;  // the logits, kept for the next passes (each thread reads back its own)
      mx = z > mx ? double(z) : mx;
    }
    mx = block_combine(mx, scratch, MaxOp{});
    if (mx == -INFINITY) {  // fully masked row: zeros (softmax) or -inf (log_softmax), not 0/0
      for (int64_t j = threadIdx.x; j < n; j += blockDim.x) yr[j] = T(log_output ? C(-INFINITY) : C(0));
      continue;
    }
    const C max_t = static_cast<C>(mx);
    double total = 0;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) total += exp(logit(j) - max_t);
    total = block_combine(total, scratch, PlusOp{});
    if (log_output) {
      const double log_total = log(total);
      for (int64_t j = threadIdx.x; j < n; j += blockDim.x)
        yr[j] = static_cast<T>(static_cast<C>(double(logit(j) - max_t) - log_total));
    } else {
      const C inv = static_cast<C>(1.0 / total);
      for (int64_t j = threadIdx.x; j < n; j += blockDim.x) yr[j] = T(exp(logit(j) - max_t) * inv);
    }
  }
}

// softmax: out = y (g - sum(g y)); log_softmax: out = g - exp(y) sum(g), masked (-inf) entries 0.
template <typename T, typename C = compute_type<T>>
__global__ void softmax_backward_kernel(Rows s, T* out, const T* y, const T* g, bool log_output) {
  __shared__ double scratch[kMaxBlockThreads];
  const int64_t n = s.size;
  for (int64_t r = blockIdx.x; r < s.rows; r += gridDim.x) {
    const T* yr = y + r * n;
    const T* gr = g + r * n;
    T* o = out + r * n;
    double sum = 0;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
      if (log_output)
        sum += C(yr[j]) == C(-INFINITY) ? 0.0 : double(C(gr[j]));
      else
        sum += double(C(gr[j]) * C(yr[j]));
    }
    const C total = static_cast<C>(block_combine(sum, scratch, PlusOp{}));
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
      const C yj = yr[j], gj = gr[j];
      if (log_output)
        o[j] = T(yj == C(-INFINITY) ? C(0) : gj - exp(yj) * total);
      else
        o[j] = T(yj * (gj - total));
    }
  }
}

int64_t row_blocks(int64_t rows) { return rows < kMaxBlocks ? (rows > 0 ? rows : 1) : kMaxBlocks; }

}  // namespace

template <typename T>
void launch_softmax(bool log_output, Rows s, void* out, const void* x, const RowMaskArgs& mask, cudaStream_t stream) {
  if (s.rows == 0 || s.size == 0) return;
  softmax_kernel<T><<<row_blocks(s.rows), row_threads(s.size), 0, stream>>>(s, static_cast<T*>(out),
                                                                            static_cast<const T*>(x), mask, log_output);
  check_kernel_launch("softmax_kernel");
}

template <typename T>
void launch_softmax_backward(bool log_output, Rows s, void* out, const void* y, const void* grad, cudaStream_t stream) {
  if (s.rows == 0 || s.size == 0) return;
  softmax_backward_kernel<T><<<row_blocks(s.rows), row_threads(s.size), 0, stream>>>(
      s, static_cast<T*>(out), static_cast<const T*>(y), static_cast<const T*>(grad), log_output);
  check_kernel_launch("softmax_backward_kernel");
}

template void launch_softmax<float>(bool, Rows, void*, const void*, const RowMaskArgs&, cudaStream_t);
template void launch_softmax<double>(bool, Rows, void*, const void*, const RowMaskArgs&, cudaStream_t);
template void launch_softmax_backward<float>(bool, Rows, void*, const void*, const void*, cudaStream_t);
template void launch_softmax_backward<double>(bool, Rows, void*, const void*, const void*, cudaStream_t);
template void launch_softmax<bfloat16>(bool, Rows, void*, const void*, const RowMaskArgs&, cudaStream_t);
template void launch_softmax_backward<bfloat16>(bool, Rows, void*, const void*, const void*, cudaStream_t);

}  // namespace loom::cuda
