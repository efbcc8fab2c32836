#pragma once
#include <cstdint>

namespace loom::kernels {
// out = gelu(x) over n contiguous floats, on all threads, with the float32
// polynomial Phi (kernels/vec_math.h); AVX-512 or AVX2 chosen per call.
void gelu_contiguous(float* out, const float* x, int64_t n);
// The same on the calling thread alone (inside a caller's parallel loop).
void gelu_span(float* out, const float* x, int64_t n);
}  // namespace loom::kernels
