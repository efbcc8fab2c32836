#pragma once
// Dropout on the GPU (dropout.cu), registered by dropout.cpp.
#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

namespace loom::cuda {

// out = keep ? x / (1 - p) : 0, keep_i = (word i % 4 of Philox block i / 4 at
// (seed, offset)) >> 8 >= ceil(p 2^24), the CPU's stream and test; mask gets
// the keep bits, bit i % 32 of word i / 32. x and out dense. relu: max(x, 0) in
// place of x (relu_dropout). residual (dense, or null): out = residual + the kept
// value (dropout_add_layer_norm's sum, add's bits).
// offset_base: null, or in a captured step (loom/capture.h) the device word each replay
// sets, added to offset (runtime.h's captured_random_base).
template <typename T>
void launch_dropout(void* out, uint32_t* mask, const void* x, const void* residual, int64_t n, double p, uint64_t seed,
                    uint64_t offset, const uint64_t* offset_base, bool relu, cudaStream_t stream);
// out = keep ? grad / (1 - p) : 0, and 0 where relu_input <= 0 when it is given
// (relu_dropout's backward; null for dropout's).
template <typename T>
void launch_dropout_backward(void* out, const void* grad, const void* relu_input, const uint32_t* mask, int64_t n,
                             double p, cudaStream_t stream);

}  // namespace loom::cuda
