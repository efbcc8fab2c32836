// The float32 vector math of kernels/vec_math.h and kernels/simd.h: exp_approx
// and log_approx against double libm over their ranges and at their edges, and
// the f32x8 instantiation against the scalar one (same operations: same bits).
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <vector>

#include "loom/kernels/vec_math.h"

using namespace loom::kernels;

namespace {
constexpr float kInf = std::numeric_limits<float>::infinity();

// About `count` floats from lo to hi (0 < lo < hi), evenly spaced in their bit
// patterns, so every binade is covered.
std::vector<float> sweep(float lo, float hi, int64_t count) {
  std::vector<float> xs;
  const int32_t a = std::bit_cast<int32_t>(lo), b = std::bit_cast<int32_t>(hi);
  const int32_t step = std::max<int32_t>(1, (b - a) / static_cast<int32_t>(count));
  for (int32_t bits = a; bits <= b && bits >= a; bits += step) xs.push_back(std::bit_cast<float>(bits));
  return xs;
}
std::vector<float> negated(std::vector<float> xs) {
  for (float& x : xs) x = -x;
  return xs;
}

// The vector instantiation of f on xs, lane by lane, must equal the scalar one bit for bit.
template <typename Fn>
void check_lanes_match_scalar(const std::vector<float>& xs, Fn f) {
  for (size_t i = 0; i + kF32Lanes <= xs.size(); i += kF32Lanes) {
    f32x8 v = load_lanes(xs.data() + i);
    f32x8 fv = f(v);
    for (int64_t l = 0; l < kF32Lanes; ++l) {
      float scalar = f(xs[i + l]);
      INFO("x = " << xs[i + l]);
      CHECK(std::bit_cast<uint32_t>(fv[l]) == std::bit_cast<uint32_t>(scalar));
    }
  }
}
}  // namespace

TEST_CASE("exp_approx: within 2e-7 of libm on normal results, flushes below e^-86.6, edges") {
  std::vector<float> xs = negated(sweep(1e-30f, 86.6f, 300000));
  for (float x : sweep(1e-30f, 88.37f, 300000)) xs.push_back(x);
  double worst = 0;
  for (float x : xs) worst = std::max(worst, std::abs(exp_float(x) - std::exp(double(x))) / std::exp(double(x)));
  MESSAGE("exp_approx max relative error " << worst);
  CHECK(worst < 2e-7);
  CHECK(exp_float(0.0f) == 1.0f);
  CHECK(exp_float(-kInf) == 0.0f);
  CHECK(exp_float(-86.7f) == 0.0f);                               // would be subnormal-adjacent: flushed
  CHECK(exp_float(-86.5f) >= std::numeric_limits<float>::min());  // still a normal float
  CHECK(exp_float(89.0f) == kInf);
  CHECK(exp_float(kInf) == kInf);
  CHECK(std::isnan(exp_float(std::nanf(""))));
  std::vector<float> all = negated(sweep(1e-30f, 100.0f, 40000));
  for (float x : sweep(1e-30f, 100.0f, 40000)) all.push_back(x);
  for (float x : {-kInf, kInf, std::nanf(""), 0.0f, -0.0f, -86.6f, 88.3f, 88.4f}) all.push_back(x);
  check_lanes_match_scalar(all, [](auto v) { return exp_approx(v); });
  // The NonPositive form (x <= 0: a logit minus its row max) agrees with the full one there.
  for (float x : negated(sweep(1e-30f, 100.0f, 40000))) CHECK(exp_approx<float, true>(x) == exp_approx(x));
  CHECK(exp_approx<float, true>(-kInf) == 0.0f);
  CHECK(std::isnan(exp_approx<float, true>(std::nanf(""))));
}

TEST_CASE("log_approx: within 2e-7 of libm for normal positive x; 0, subnormal, negative, inf, NaN") {
  double worst = 0;
  for (float x : sweep(std::numeric_limits<float>::min(), 3e38f, 600000)) {
    double truth = std::log(double(x));
    if (truth != 0) worst = std::max(worst, std::abs(log_approx(x) - truth) / std::abs(truth));
  }
  MESSAGE("log_approx max relative error " << worst);
  CHECK(worst < 2e-7);
  CHECK(log_approx(1.0f) == 0.0f);
  CHECK(log_approx(0.0f) == -kInf);
  CHECK(log_approx(1e-40f) == -kInf);  // subnormal
  CHECK(std::isnan(log_approx(-1.0f)));
  CHECK(log_approx(kInf) == kInf);
  CHECK(std::isnan(log_approx(std::nanf(""))));
  std::vector<float> all = sweep(1e-30f, 1e30f, 80000);
  for (float x : {0.0f, -0.0f, 1e-40f, -2.0f, kInf, -kInf, std::nanf(""), 1.0f}) all.push_back(x);
  check_lanes_match_scalar(all, [](auto v) { return log_approx(v); });
}

TEST_CASE("load_lanes / store_lanes / load_byte_lanes touch only the first `width` elements") {
  float src[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  for (int64_t width = 0; width <= 8; ++width) {
    f32x8 v = load_lanes(src, width, -1.0f);
    for (int64_t l = 0; l < 8; ++l) CHECK(v[l] == (l < width ? src[l] : -1.0f));
    float dst[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    store_lanes(dst, v, width);
    for (int64_t l = 0; l < 8; ++l) CHECK(dst[l] == (l < width ? src[l] : 0.0f));
    uint8_t bytes[8] = {1, 0, 1, 1, 0, 0, 1, 1};
    i32x8 b = load_byte_lanes(bytes, width);
    for (int64_t l = 0; l < 8; ++l) CHECK(b[l] == (l < width ? bytes[l] : 0));
  }
  f32x8 v = {3, -1, 7, 2, 9, 0, -5, 4};
  CHECK(max_across(v) == 9.0f);
  CHECK(add_across(v) == 19.0f);
  f32x8 rows[8];
  for (int i = 0; i < 8; ++i) rows[i] = v * static_cast<float>(i + 1) + static_cast<float>(i);
  f32x8 sums = add_across_each(rows);
  for (int i = 0; i < 8; ++i) CHECK(sums[i] == add_across(rows[i]));
}
