#pragma once
// arange on the GPU (factory.cu), registered by factory.cpp.
#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

namespace loom::cuda {

// out[i] = i.
template <typename T>
void launch_arange(void* out, int64_t n, cudaStream_t stream);

}  // namespace loom::cuda
