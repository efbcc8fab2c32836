// Dropout on the GPU: the CPU's Philox stream and keep test, the keep bits as a bitmask.
// Relu: relu_dropout's kernels (max(x, 0) in place of x; the backward zero where x <= 0).
// A residual, when given, is added to the kept values (dropout_add_layer_norm's sum).
#include <cmath>
#include <cstdint>

#include "loom/kernels/functors.h"
#include "loom/philox.h"
#include "kernel_errors.h"
#include "loom/cuda/launch.h"
#include "dropout_launch.h"

namespace loom::cuda {

namespace {

constexpr int kWarp = 32;

// One warp per 32 elements (one mask word): each lane draws its element's word,
// the warp's keep bits gathered with a ballot (a word written by one lane).
// bfloat16 computes in float32 (C) and rounds once, as on the CPU.
template <typename T, bool Relu, typename C = compute_type<T>>
__global__ void dropout_kernel(T* out, uint32_t* mask, const T* x, const T* residual, int64_t n, uint32_t threshold,
                               C scale, uint64_t seed, uint64_t first_offset, const uint64_t* offset_base) {
  const uint64_t offset = first_offset + (offset_base ? *offset_base : 0);
  const int lane = threadIdx.x % kWarp;
  const int64_t warps = int64_t(gridDim.x) * blockDim.x / kWarp;
  for (int64_t word = (blockIdx.x * int64_t(blockDim.x) + threadIdx.x) / kWarp; word * kWarp < n; word += warps) {
    const int64_t i = word * kWarp + lane;
    bool keep = false;
    if (i < n) {
      const Philox4x32 bits = philox_block(seed, offset, philox_block_of(i));
      keep = (bits.v[i % 4] >> 8) >= threshold;
      const C v = C(x[i]);
      const C scaled = (Relu ? fn::Relu{}(v) : v) * scale;
      const C kept = keep ? scaled : C(0);
      out[i] = T(residual ? C(residual[i]) + kept : kept);
    }
    const uint32_t word_bits = __ballot_sync(0xffffffffu, keep);
    if (lane == 0) mask[word] = word_bits;
  }
}

template <typename T, bool Relu, typename C = compute_type<T>>
__global__ void dropout_backward_kernel(T* out, const T* grad, const T* x, const uint32_t* mask, int64_t n, C scale) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const C scaled = C(grad[i]) * scale;
    const C kept = (mask[i / kWarp] >> (i % kWarp)) & 1u ? scaled : C(0);
    out[i] = T(Relu ? fn::ReluBackward{}(C(x[i]), kept) : kept);
  }
}

}  // namespace

template <typename T>
void launch_dropout(void* out, uint32_t* mask, const void* x, const void* residual, int64_t n, double p, uint64_t seed,
                    uint64_t offset, const uint64_t* offset_base, bool relu, cudaStream_t stream) {
  if (n == 0) return;
  using C = compute_type<T>;
  const C scale = p < 1.0 ? static_cast<C>(1.0 / (1.0 - p)) : C(0);
  const uint32_t threshold = static_cast<uint32_t>(std::ceil(p * 16777216.0));
  const int64_t words = (n + kWarp - 1) / kWarp;
  const auto kernel = relu ? dropout_kernel<T, true> : dropout_kernel<T, false>;
  kernel<<<blocks_for(words * kWarp), kThreads, 0, stream>>>(static_cast<T*>(out), mask, static_cast<const T*>(x),
                                                             static_cast<const T*>(residual), n, threshold, scale, seed,
                                                             offset, offset_base);
  check_kernel_launch("dropout_kernel");
}

template <typename T>
void launch_dropout_backward(void* out, const void* grad, const void* relu_input, const uint32_t* mask, int64_t n,
                             double p, cudaStream_t stream) {
  if (n == 0) return;
  using C = compute_type<T>;
  const C scale = p < 1.0 ? static_cast<C>(1.0 / (1.0 - p)) : C(0);
  const auto kernel = relu_input ? dropout_backward_kernel<T, true> : dropout_backward_kernel<T, false>;
  kernel<<<blocks_for(n), kThreads, 0, stream>>>(static_cast<T*>(out), static_cast<const T*>(grad),
                                                 static_cast<const T*>(relu_input), mask, n, scale);
  check_kernel_launch("dropout_backward_kernel");
}

#define LOOM_CUDA_DROPOUT(T)                                                                                       \
  template void launch_dropout<T>(void*, uint32_t*, const void*, const void*, int64_t, double, uint64_t, uint64_t, \
                                  const uint64_t*, bool, cudaStream_t);                                            \
  template void launch_dropout_backward<T>(void*, const void*, const void*, const uint32_t*, int64_t, double,      \
                                           cudaStream_t);
LOOM_CUDA_DROPOUT(float)
LOOM_CUDA_DROPOUT(double)
LOOM_CUDA_DROPOUT(bfloat16)
#undef LOOM_CUDA_DROPOUT

}  // namespace loom::cuda
