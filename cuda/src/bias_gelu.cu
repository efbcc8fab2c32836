// bias_gelu on the GPU: one grid-stride pass, gelu from the functor the CPU runs.
#include <cstdint>

#include "bias_gelu_launch.h"
#include "kernel_errors.h"
#include "loom/cuda/launch.h"
#include "loom/kernels/functors.h"

namespace loom::cuda {

namespace {

template <typename T>
__global__ void bias_gelu_kernel(T* out, const T* x, const T* bias, int64_t n, int64_t d) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    out[i] = fn::Gelu{}(x[i] + bias[i % d]);
}

}  // namespace

template <typename T>
void launch_bias_gelu(void* out, const void* x, const void* bias, int64_t n, int64_t d, cudaStream_t stream) {
  if (n == 0) return;
  bias_gelu_kernel<T><<<blocks_for(n), kThreads, 0, stream>>>(static_cast<T*>(out), static_cast<const T*>(x),
                                                              static_cast<const T*>(bias), n, d);
  check_kernel_launch("bias_gelu_kernel");
}

template void launch_bias_gelu<float>(void*, const void*, const void*, int64_t, int64_t, cudaStream_t);
template void launch_bias_gelu<double>(void*, const void*, const void*, int64_t, int64_t, cudaStream_t);

}  // namespace loom::cuda
