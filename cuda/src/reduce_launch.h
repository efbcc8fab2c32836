#pragma once
// Reductions on the GPU (sum, amax, amin, argmax, argmin, logsumexp, var's sum of squares,
// any_non_finite): one block per output, each thread taking every blockDim-th
// reduced element, partials merged by a fixed tree. Fixed order, no atomics.
#include <cuda_runtime_api.h>

#include "loom/cuda/launch.h"

namespace loom::cuda {

enum class Reduction { sum, amax, amin, argmax, argmin, logsumexp, square_sum };

// out[o] = the reduction over x's reduced elements of output o. out is dense
// (T, or int64 for argmax and argmin); square_sum writes sum(x^2) / divisor.
template <typename T>
void launch_reduce(Reduction r, const ReduceShape& s, void* out, const void* x, double divisor, cudaStream_t stream);

// Whether any element of the strided x is NaN or Inf (waits for the answer).
// scratch: 4 bytes of device memory.
template <typename T>
bool any_non_finite(const Strided<1>& s, const void* x, void* scratch, cudaStream_t stream);

}  // namespace loom::cuda
