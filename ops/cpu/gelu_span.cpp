// The float32 gelu loop alone, compiled twice and chosen per call by
// avx512_enabled() (loom/cpu.h): AVX-512 where the CPU has it (this polynomial
// is arithmetic-bound, so twice the lanes measured 2x: 2.1 -> 1.2 ms for 3.1M
// elements on one core), AVX2 otherwise. Elementwise with explicit fmas, so
// both give the same bits (tests/test_elementwise.cpp runs both).
#include "gelu_span.h"

#include <omp.h>

#include <algorithm>

#include "loom/cpu.h"
#include "loom/kernels/loops.h"
#include "loom/kernels/vec_math.h"

namespace loom::kernels {

namespace {
inline void gelu_float_loop(float* out, const float* x, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) out[i] = gelu_float(x[i]);
}
LOOM_TARGET_AVX512 void gelu_float_span_avx512(float* out, const float* x, int64_t n) { gelu_float_loop(out, x, n); }
}  // namespace

void gelu_span(float* out, const float* x, int64_t n) {
  if (avx512_enabled())
    gelu_float_span_avx512(out, x, n);
  else
    gelu_float_loop(out, x, n);
}

void gelu_contiguous(float* out, const float* x, int64_t n) {
  constexpr int64_t kChunk = 16384;
  const int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (n >= kParallelGrain && !omp_in_parallel())
  for (int64_t c = 0; c < chunks; ++c) gelu_span(out + c * kChunk, x + c * kChunk, std::min(kChunk, n - c * kChunk));
}

}  // namespace loom::kernels
