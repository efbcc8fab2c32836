#pragma once
// Backend::fill on the GPU: `count` copies of an element of 1, 2, 4 or 8 bytes.
#include <cstddef>

#include <cuda_runtime_api.h>

namespace loom::cuda {

void launch_fill(void* dst, const void* value, size_t element_bytes, size_t count, cudaStream_t stream);

}  // namespace loom::cuda
