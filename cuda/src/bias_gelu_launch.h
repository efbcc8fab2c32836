#pragma once
// bias_gelu on the GPU (bias_gelu.cu), registered by bias_gelu.cpp.
#include <cstdint>

#include <cuda_runtime_api.h>

namespace loom::cuda {

// out[i] = gelu(x[i] + bias[i % d]) over n elements, all dense; the CPU's functor.
template <typename T>
void launch_bias_gelu(void* out, const void* x, const void* bias, int64_t n, int64_t d, cudaStream_t stream);

}  // namespace loom::cuda
