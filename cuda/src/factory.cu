// arange on the GPU: out[i] = i.
#include <cstdint>

#include "kernel_errors.h"
#include "loom/cuda/launch.h"
#include "factory_launch.h"

namespace loom::cuda {

namespace {

template <typename T>
__global__ void arange_kernel(T* out, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    out[i] = static_cast<T>(i);
}

}  // namespace

template <typename T>
void launch_arange(void* out, int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  arange_kernel<T><<<blocks_for(n), kThreads, 0, stream>>>(static_cast<T*>(out), n);
  check_kernel_launch("arange_kernel");
}

template void launch_arange<float>(void*, int64_t, cudaStream_t);
template void launch_arange<double>(void*, int64_t, cudaStream_t);
template void launch_arange<int32_t>(void*, int64_t, cudaStream_t);
template void launch_arange<int64_t>(void*, int64_t, cudaStream_t);

}  // namespace loom::cuda
