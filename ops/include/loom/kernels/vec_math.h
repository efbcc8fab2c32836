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

// e^(-x^2/2) for 0 <= x < 13 (a >= -84.5: no clamps needed) to a few ulp.
// exp_float(-0.5f * x * x) would round x * x to float first: at x = 10 the
// argument is -50, whose rounding error (up to ulp/2 = 1.9e-6) is directly a
// relative error of the result. Here x * x = sq + sq_lo exactly (one fma),
// a = -sq/2 is exact, and the small -sq_lo/2 joins the reduced argument r
// after the exact Cody-Waite steps, so the result is as accurate as exp_float's
// polynomial. Same reduction as exp_float; n is rounded with the 1.5 * 2^23
// shifter (its low mantissa bits are n) instead of floor and a conversion.
// Callers mask x >= 13 (there n < -126 and the bits are garbage).
LOOM_HD float exp_minus_half_square(float x) {
  constexpr float kShifter = 12582912.0f;  // 1.5 * 2^23
  float sq = x * x;
  float sq_lo = std::fma(x, x, -sq);
  float a = -0.5f * sq;
  float k = std::fma(a, 1.44269504088896341f, kShifter);  // n + kShifter, n = round(a / ln 2)
  float n = k - kShifter;
  float r = std::fma(n, -0.693359375f, a);  // ln 2 in two parts: exact first product
  r = std::fma(n, 2.12194440e-4f, r);
  r = std::fma(-0.5f, sq_lo, r);
  // e^r on |r| <= ln2/2: degree-6 minimax (relative error 2e-8 with these
  // float coefficients; scripts/fit_normal_tail.py --exp), 6 fmas where
  // exp_float's Cephes form takes 8 operations.
  float p = 1.383679172e-03f;
  p = std::fma(p, r, 8.374857061e-03f);
  p = std::fma(p, r, 4.166822872e-02f);
  p = std::fma(p, r, 1.666641968e-01f);
  p = std::fma(p, r, 4.999999206e-01f);
  p = std::fma(p, r, 1.000000036e+00f);
  float er = std::fma(p, r, 1.000000001e+00f);
  float two_n = std::bit_cast<float>((std::bit_cast<int32_t>(k) + 127) << 23);  // low bits of k are n
  return er * two_n;
}

// The normal CDF's tail without cancellation, after Numerical Recipes' erfcc
// (erfc(z) = t * e^(-z^2 + P(t)), t = 1 / (1 + z/2)) but with the e^P(t)
// factor folded into a polynomial: for z = |x| / sqrt 2 >= 0,
//   Phi(-|x|) = erfc(z) / 2 = t * R(t) * e^(-x^2/2),   t = 1 / (1 + z/2)
// R(t) = erfc(z) e^(z^2) / (2t) is smooth on t in (0, 1] (-> 1/(2 sqrt pi) as
// z -> inf); this degree-8 fit has relative error 4e-8 for z in [0, 13/sqrt 2]
// (scripts/fit_normal_tail.py: weighted least squares on Chebyshev nodes,
// iterated toward minimax). Unlike erfcc, the one exp depends on x alone, not
// on t, so it runs in parallel with the division and the polynomial (a
// shorter dependency chain), and gelu's backward shares it with the density.
LOOM_HD float normal_tail_poly(float t) {
  float p = -2.937355599e-02f;
  p = std::fma(p, t, 1.414981915e-01f);
  p = std::fma(p, t, -2.419557924e-01f);
  p = std::fma(p, t, 1.371395649e-01f);
  p = std::fma(p, t, -1.199760597e-02f);
  p = std::fma(p, t, 1.007817339e-01f);
  p = std::fma(p, t, 1.216954088e-01f);
  p = std::fma(p, t, 1.411676684e-01f);
  return std::fma(p, t, 1.410443661e-01f);
}

// Phi(x), the standard normal CDF, = erfc(-x / sqrt 2) / 2, vectorizable
// (libm's erff is a call) and accurate in relative terms on both sides:
//   Phi(-|x|) = t * R(t) * e^(-x^2/2)        (no cancellation in the tail)
//   Phi(|x|)  = 1 - Phi(-|x|)                (erfc(-z) = 2 - erfc(z))
// the side picked by a select, not a branch. Max relative error ~4e-7 over
// [-10, 10] in float arithmetic (fit 4e-8, exp ~1e-7, t and products rounded;
// tests/test_elementwise.cpp checks it against double erfc). For |x| >= 13,
// Phi(-|x|) < 2e-38 is taken as 0: Phi(-inf) = 0, Phi(inf) = 1. A NaN x gives
// Phi = 1 here; x * Phi(x) (gelu) is NaN all the same.
LOOM_HD float normal_cdf_float(float x) {
  float ax = std::fabs(x);
  float t = 1.0f / std::fma(ax, 0.353553390593273762f, 1.0f);  // 1 / (1 + z/2), z = |x| / sqrt 2
  float lower = t * normal_tail_poly(t) * exp_minus_half_square(ax);  // Phi(-|x|)
  lower = ax < 13.0f ? lower : 0.0f;  // also drops inf/NaN garbage from the exp
  return x < 0.0f ? lower : 1.0f - lower;
}

// gelu(x) = x Phi(x) = max(x, 0) - |x| Phi(-|x|): the same pieces as
// normal_cdf_float, with the sign handled by max and one subtraction instead
// of a select between Phi(-|x|) and 1 - Phi(-|x|) and a multiply (fewer
// operations: this loop is bound by arithmetic throughput). gelu(inf) = inf;
// gelu(-inf) = 0 (the limit; the libm formula gives -inf * 0 = NaN); NaN
// stays NaN (it passes the max).
LOOM_HD float gelu_float(float x) {
  float ax = std::fabs(x);
  float t = 1.0f / std::fma(ax, 0.353553390593273762f, 1.0f);
  float tail = ax * t * normal_tail_poly(t) * exp_minus_half_square(ax);  // |x| Phi(-|x|)
  tail = ax < 13.0f ? tail : 0.0f;  // also drops inf/NaN garbage from the exp
  float positive = x < 0.0f ? 0.0f : x;
  return positive - tail;
}

// Phi(x) and the density phi(x) = e^(-x^2/2) / sqrt(2 pi) together (gelu's
// derivative needs both), sharing the one exp.
LOOM_HD float normal_cdf_pdf_float(float x, float* pdf) {
  float ax = std::fabs(x);
  float t = 1.0f / std::fma(ax, 0.353553390593273762f, 1.0f);
  float gauss = exp_minus_half_square(ax);
  gauss = ax < 13.0f ? gauss : 0.0f;
  *pdf = 0.398942280401432678f * gauss;  // 1 / sqrt(2 pi)
  float lower = t * normal_tail_poly(t) * gauss;
  return x < 0.0f ? lower : 1.0f - lower;
}

}  // namespace loom::kernels
