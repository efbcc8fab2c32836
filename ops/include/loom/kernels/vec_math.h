#pragma once
// Vectorizable float32 math. libm's expf is a call the compiler cannot turn
// into vector code, which makes softmax, log_softmax and cross-entropy run at
// scalar speed; this exp is plain arithmetic, so a `#pragma omp simd` loop runs
// it 8 lanes at a time. float64 keeps libm (it is for gradient checks).
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#include "loom/hostdevice.h"

namespace loom::kernels {

// e^x = 2^n * e^r with n = round(x / ln 2) and r = x - n ln 2 in [-ln2/2, ln2/2];
// e^r from a degree-7 polynomial (Cephes expf coefficients). Max relative error
// ~1e-7 (within 2 ulp of libm). Results that would be subnormal flush to 0;
// -inf gives 0, +inf and overflow give inf, NaN stays NaN.
LOOM_HD float exp_float(float x) {
  constexpr float kMax = 88.3762626647949f, kMin = -87.3365447504019f;
  float clamped = x > kMax ? kMax : x;
  clamped = clamped < kMin ? kMin : clamped;
  float n = std::floor(clamped * 1.44269504088896341f + 0.5f);
  float r = clamped - n * 0.693359375f;  // ln 2 split in two for an exact first product
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  float er = p * r * r + r + 1.0f;
  float two_n = std::bit_cast<float>((static_cast<int32_t>(n) + 127) << 23);
  float result = er * two_n;
  result = x < kMin ? 0.0f : result;
  result = x > kMax ? std::numeric_limits<float>::infinity() : result;
  return x != x ? x : result;
}

}  // namespace loom::kernels
