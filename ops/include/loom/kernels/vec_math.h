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
#include "loom/kernels/simd.h"

namespace loom::kernels {

// The pieces of every float exp here: e^x = 2^n e^r with n = round(x / ln 2),
// r = x - n ln 2 in [-ln2/2, ln2/2] (ln 2 in two parts, the first exact in a
// product with n, so r is exact up to the second part's rounding).
inline constexpr float kLog2e = 1.44269504088896341f;
inline constexpr float kLn2Hi = 0.693359375f, kLn2Lo = -2.12194440e-4f;
// Adding 1.5 * 2^23 rounds to an integer in float arithmetic: k = x / ln 2 +
// kShifter leaves n = round(x / ln 2) in k's low mantissa bits (|n| < 2^22).
inline constexpr float kShifter = 12582912.0f;

// e^r on |r| <= ln2/2: degree-6 minimax (relative error 2e-8 with these float
// coefficients; scripts/fit_normal_tail.py --exp), 7 fmas.
template <typename F>
LOOM_HD F exp_reduced(F r) {
  auto c = [](float v) { return splat<F>(v); };
  F p = c(1.383679172e-03f);
  p = fma_lanes(p, r, c(8.374857061e-03f));
  p = fma_lanes(p, r, c(4.166822872e-02f));
  p = fma_lanes(p, r, c(1.666641968e-01f));
  p = fma_lanes(p, r, c(4.999999206e-01f));
  p = fma_lanes(p, r, c(1.000000036e+00f));
  return fma_lanes(p, r, c(1.000000001e+00f));
}

// 2^n from k = n + kShifter, for -126 <= n <= 127: n's bits plus the exponent
// bias, shifted into the exponent field (the shifter's own bits shift out).
template <typename F>
LOOM_HD F pow2_from_shifted(F k) {
  return float_from_bits((bits_of_float(k) + 127) << 23);
}

// e^x to ~1e-7 relative (within 2 ulp of libm). Results below e^-86.6 ~ 2.4e-38
// flush to 0: below that n would reach -126 and e^r 2^n be subnormal, and a
// subnormal product costs a microcode assist of ~100 cycles (masked attention
// logits, all -inf, ran 2x slower for it). -inf gives 0, +inf and overflow
// give inf, NaN stays NaN (its comparisons are false, so it passes the clamps
// and poisons r). NonPositive: the caller knows x <= 0 (a logit minus its
// row's max), which drops the overflow clamp and select.
// F is float (a scalar loop under `#pragma omp simd`) or f32x8 (kernels/simd.h):
// the same operations in the same order, so both give the same bits.
template <typename F, bool NonPositive = false>
LOOM_HD F exp_approx(F x) {
  auto c = [](float v) { return splat<F>(v); };
  const F max_arg = c(88.3762626647949f), min_arg = c(-86.6f);
  F clamped = select(x < min_arg, min_arg, x);
  if constexpr (!NonPositive) clamped = select(clamped > max_arg, max_arg, clamped);
  F k = fma_lanes(clamped, c(kLog2e), c(kShifter));
  F n = k - kShifter;
  F r = fma_lanes(n, c(-kLn2Hi), clamped);
  r = fma_lanes(n, c(-kLn2Lo), r);
  F result = exp_reduced(r) * pow2_from_shifted(k);
  result = select(x < min_arg, c(0.0f), result);
  if constexpr (NonPositive)
    return result;
  else
    return select(x > max_arg, c(std::numeric_limits<float>::infinity()), result);
}
LOOM_HD float exp_float(float x) { return exp_approx(x); }

// ln x = e ln 2 + ln m with x = m 2^e, m in [sqrt(1/2), sqrt 2); ln m from
// Cephes logf's degree-9 polynomial in m - 1. Max relative error ~1e-7 for
// normal x > 0 (a row's sum of exponentials in log_softmax and cross-entropy,
// which libm's logf would make a call per row). 0 and subnormals give -inf,
// x < 0 and NaN give NaN, +inf gives inf.
template <typename F>
LOOM_HD F log_approx(F x) {
  auto c = [](float v) { return splat<F>(v); };
  const auto bits = bits_of_float(x);
  F e = to_float_lanes((bits >> 23) - 126);  // x = m 2^e, m in [1/2, 1)
  F m = float_from_bits((bits & 0x007fffff) | 0x3f000000);
  const auto small = m < 0.707106781186547524f;  // move m to [sqrt(1/2), sqrt 2)
  e = select(small, e - 1.0f, e);
  F t = select(small, m + m, m) - 1.0f;  // t = m - 1, exact
  F z = t * t;
  F p = c(7.0376836292e-2f);
  p = fma_lanes(p, t, c(-1.1514610310e-1f));
  p = fma_lanes(p, t, c(1.1676998740e-1f));
  p = fma_lanes(p, t, c(-1.2420140846e-1f));
  p = fma_lanes(p, t, c(1.4249322787e-1f));
  p = fma_lanes(p, t, c(-1.6668057665e-1f));
  p = fma_lanes(p, t, c(2.0000714765e-1f));
  p = fma_lanes(p, t, c(-2.4999993993e-1f));
  p = fma_lanes(p, t, c(3.3333331174e-1f));
  F y = fma_lanes(e, c(-2.12194440e-4f), p * t * z);
  y = fma_lanes(z, c(-0.5f), y);
  F result = fma_lanes(e, c(0.693359375f), t + y);  // ln 2 in two parts, as in exp_approx
  constexpr float kInf = std::numeric_limits<float>::infinity();
  result = select(x < 1.17549435e-38f, c(-kInf), result);  // 0 and subnormals
  result = select(x < 0.0f, c(std::numeric_limits<float>::quiet_NaN()), result);
  result = select(x == kInf, c(kInf), result);
  return select(x != x, x, result);
}

// e^(-x^2/2) for 0 <= x < 13 (a >= -84.5: no clamps needed) to a few ulp.
// exp_float(-0.5f * x * x) would round x * x to float first: at x = 10 the
// argument is -50, whose rounding error (up to ulp/2 = 1.9e-6) is directly a
// relative error of the result. Here x * x = sq + sq_lo exactly (one fma),
// a = -sq/2 is exact, and the small -sq_lo/2 joins the reduced argument r
// after the exact Cody-Waite steps, so the result is as accurate as exp_approx.
// Callers mask x >= 13 (there n < -126 and the bits are garbage).
LOOM_HD float exp_minus_half_square(float x) {
  float sq = x * x;
  float sq_lo = std::fma(x, x, -sq);
  float a = -0.5f * sq;
  float k = std::fma(a, kLog2e, kShifter);
  float n = k - kShifter;
  float r = std::fma(n, -kLn2Hi, a);
  r = std::fma(n, -kLn2Lo, r);
  r = std::fma(-0.5f, sq_lo, r);
  return exp_reduced(r) * pow2_from_shifted(k);
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
  float t = 1.0f / std::fma(ax, 0.353553390593273762f, 1.0f);         // 1 / (1 + z/2), z = |x| / sqrt 2
  float lower = t * normal_tail_poly(t) * exp_minus_half_square(ax);  // Phi(-|x|)
  lower = ax < 13.0f ? lower : 0.0f;                                  // also drops inf/NaN garbage from the exp
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
  tail = ax < 13.0f ? tail : 0.0f;                                        // also drops inf/NaN garbage from the exp
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
