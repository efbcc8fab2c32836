// Elementwise math, comparisons and selection: forward values and gradients on
// hand-picked inputs, result dtypes, and error messages. Gradients against finite
// differences are checked for every sample by `loom gradcheck`; here we pin values.
//
// Provenance of the expected values: PyTorch 1.13 (Debian python3-torch), e.g.
//   /usr/bin/python3 -c "import torch; x = torch.tensor([-2.5, -1., -0.25, 0., 0.5, 1., 3.],
//     dtype=torch.float64); print(torch.nn.functional.gelu(x).tolist())"
// and likewise torch.sqrt / rsqrt / sigmoid / clamp / maximum / minimum / eq... / where /
// masked_fill, with gradients from .sum().backward().
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "loom/cpu.h"
#include "loom/ops.h"
#include "helpers.h"

using namespace loom;
using loom::testing::error_of;

namespace {

void check_values(const Tensor& t, const std::vector<double>& expected, double tol = 1e-14) {
  auto got = t.to_vector<double>();
  REQUIRE(got.size() == expected.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i);
    CHECK(got[i] == doctest::Approx(expected[i]).epsilon(tol));
  }
}

void check_bools(const Tensor& t, const std::vector<int>& expected) {
  CHECK(t.dtype() == DType::b8);
  auto got = t.to_vector<bool>();
  REQUIRE(got.size() == expected.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i);
    CHECK(got[i] == static_cast<bool>(expected[i]));
  }
}

// The message of the loom::Error thrown by fn (empty when none is thrown).
bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

Tensor mask(std::initializer_list<double> values) { return tensor(values, DType::b8); }

const std::vector<double> kX = {-2.5, -1.0, -0.25, 0.0, 0.5, 1.0, 3.0};

}  // namespace

TEST_CASE("sqrt and rsqrt") {
  auto p = tensor({0.25, 1.0, 2.0, 9.0}, f64);
  check_values(sqrt(p), {0.5, 1.0, 1.4142135623730951, 3.0});
  check_values(rsqrt(p), {2.0, 1.0, 0.7071067811865475, 0.3333333333333333});
  CHECK(sqrt(tensor({4.0}, f32)).dtype() == DType::f32);
}

TEST_CASE("abs and its gradient") {
  auto x = from_vector(kX, {7}, {f64});
  check_values(abs(x), {2.5, 1.0, 0.25, 0.0, 0.5, 1.0, 3.0});
  x.requires_grad_();
  abs(x).sum().backward();
  check_values(x.grad(), {-1, -1, -1, 0, 1, 1, 1});  // sign(x); 0 at the kink, like PyTorch
}

TEST_CASE("sigmoid values and gradient") {
  auto x = from_vector(kX, {7}, {f64});
  check_values(sigmoid(x), {0.07585818002124355, 0.2689414213699951, 0.43782349911420193, 0.5, 0.6224593312018546,
                            0.7310585786300049, 0.9525741268224334});
  x.requires_grad_();
  sigmoid(x).sum().backward();
  check_values(x.grad(), {0.07010371654510815, 0.19661193324148185, 0.24613408273759835, 0.25, 0.2350037122015945,
                          0.19661193324148185, 0.045176659730912});
  // Saturates cleanly instead of producing NaN.
  check_values(sigmoid(tensor({-1000.0, 1000.0}, f64)), {0.0, 1.0});
}

TEST_CASE("gelu (exact erf form) values and gradient") {
  auto x = from_vector(kX, {7}, {f64});
  check_values(gelu(x), {-0.015524163314440398, -0.15865525393145702, -0.10032341857926907, 0.0, 0.34573123063700656,
                         0.841344746068543, 2.99595030590511});
  x.requires_grad_();
  gelu(x).sum().backward();
  check_values(x.grad(), {-0.03761108590814519, -0.08331547058768635, 0.304626645116364, 0.5, 0.8674951246561629,
                          1.0833154705876864, 1.011945647204184});
}

// PyTorch's gelu(x, approximate='tanh'), float64, values and gradient; the two
// forms differ by up to ~2e-4 on these points, far above check_values' tolerance.
TEST_CASE("gelu tanh approximation: values and gradient as PyTorch's approximate='tanh'") {
  auto x = from_vector(kX, {7}, {f64});
  check_values(gelu(x, GeluApproximate::tanh), {-0.015084266089998577, -0.15880800939172324, -0.100324649298315, 0.0,
                                                0.34571400982514394, 0.8411919906082768, 2.996362607918227});
  CHECK(amax(abs(sub(gelu(x, GeluApproximate::tanh), gelu(x)))).item<double>() > 4e-4);
  CHECK(amax(abs(sub(gelu(x, GeluApproximate::none), gelu(x)))).item<double>() == 0.0);
  x.requires_grad_();
  gelu(x, GeluApproximate::tanh).sum().backward();
  check_values(x.grad(), {-0.03795157621266618, -0.08296408384578252, 0.30464590484893955, 0.5, 0.8673699035346424,
                          1.0829640838457826, 1.0115841666309695});
  auto xf = from_vector(std::vector<float>{-3.f, -0.5f, 0.7f, 2.f}, {4}, {f32});
  auto yf = gelu_tanh(xf).to_vector<float>();
  const std::vector<double> torch_f64 = {-0.0036373920817729943, -0.15428599017485606, 0.5305701347051167,
                                         1.954597694087775};
  for (size_t i = 0; i < yf.size(); ++i) CHECK(yf[i] == doctest::Approx(torch_f64[i]).epsilon(1e-6));
}

// float32 gelu takes the vector Phi of kernels/vec_math.h (not libm's erff).
// Truth in double from erfc, not erf: 1 + erf(x / sqrt 2) cancels for negative
// x even in double (at x = -10, Phi = 7.6e-24 is far below double's epsilon).
// Derivative errors are relative to |Phi(x)| + |x phi(x)|, the scale of the sum
// Phi + x phi (which crosses zero at x = -0.75, where no float method is
// accurate relative to the sum itself).
TEST_CASE("gelu float32: vector Phi within 1e-6 relative of double erfc over [-10, 10]") {
  const int64_t n = 2000001;  // step 1e-5
  std::vector<float> xs(n);
  for (int64_t i = 0; i < n; ++i) xs[i] = static_cast<float>(-10.0 + 20.0 * static_cast<double>(i) / (n - 1));
  Tensor x = from_vector(xs, {n}, {f32});
  Tensor y = gelu(x);
  Tensor d = gelu_backward(x, ones({n}, {f32}));
  auto yv = y.to_vector<float>(), dv = d.to_vector<float>();
  double worst = 0, worst_d = 0;
  for (int64_t i = 0; i < n; ++i) {
    double xd = xs[i];
    double cdf = 0.5 * std::erfc(-xd / std::sqrt(2.0));
    double pdf = std::exp(-0.5 * xd * xd) / std::sqrt(2.0 * M_PI);
    double g = xd * cdf, dg = cdf + xd * pdf;
    if (g != 0)
      worst = std::max(worst, std::abs(yv[i] - g) / std::abs(g));
    else
      CHECK(yv[i] == 0.0f);
    worst_d = std::max(worst_d, std::abs(dv[i] - dg) / (cdf + std::abs(xd * pdf)));
  }
  MESSAGE("gelu max relative error " << worst << ", gelu' " << worst_d);
  // The AVX2 twin of the AVX-512 loop gives the same bits.
  const bool previous = set_avx512_enabled(false);
  CHECK(gelu(x).to_vector<float>() == yv);
  set_avx512_enabled(previous);
  CHECK(worst < 1e-6);    // measured 3.8e-7
  CHECK(worst_d < 1e-6);  // measured 3.6e-7
  // Edges: the tails are exact to float, infinities as in the libm formula.
  auto at = [](float v) { return gelu(from_vector(std::vector<float>{v}, {1}, {f32})).to_vector<float>()[0]; };
  CHECK(at(20.0f) == 20.0f);
  CHECK(at(-20.0f) == 0.0f);
  CHECK(at(INFINITY) == INFINITY);
  CHECK(at(-INFINITY) == 0.0f);  // the limit (libm's x/2 * (1 + erf(x / sqrt 2)) gives -inf * 0 = NaN)
  CHECK(std::isnan(at(NAN)));
}

TEST_CASE("clamp values and gradient") {
  auto x = from_vector(kX, {7}, {f64});
  check_values(clamp(x, -1.0, 0.5), {-1.0, -1.0, -0.25, 0.0, 0.5, 0.5, 0.5});
  auto y = from_vector(std::vector<double>{-2.5, -0.25, 0.0, 1.0, 3.0}, {5}, {f64});
  y.requires_grad_();
  clamp(y, -1.0, 0.5).sum().backward();
  check_values(y.grad(), {0, 1, 1, 0, 0});  // passes only inside the bounds
  CHECK(contains(error_of([&] { clamp(x, 1.0, -1.0); }), "clamp: min (1) is greater than max (-1)"));
}

TEST_CASE("maximum / minimum broadcast, ties split the gradient") {
  auto a = tensor({{1.0, -2.0, 3.0}, {0.5, 0.5, -1.0}}, f64);
  auto b = tensor({0.5, 0.0, 3.0}, f64);  // ties: a[0][2] == b[2], a[1][0] == b[0]
  a.requires_grad_();
  b.requires_grad_();
  auto mx = maximum(a, b);
  CHECK(mx.shape() == Shape{2, 3});
  check_values(mx, {1.0, 0.0, 3.0, 0.5, 0.5, 3.0});
  mx.sum().backward();
  check_values(a.grad(), {1.0, 0.0, 0.5, 0.5, 1.0, 0.0});
  check_values(b.grad(), {0.5, 1.0, 1.5});

  auto a2 = a.detach().requires_grad_();
  auto b2 = b.detach().requires_grad_();
  auto mn = minimum(a2, b2);
  check_values(mn, {0.5, -2.0, 3.0, 0.5, 0.0, -1.0});
  mn.sum().backward();
  check_values(a2.grad(), {0.0, 1.0, 0.5, 0.5, 0.0, 1.0});
  check_values(b2.grad(), {1.5, 1.0, 0.5});

  // NaN propagates from either side, like PyTorch.
  for (const Tensor& t : {maximum(tensor({1.0, NAN}, f64), tensor({NAN, 1.0}, f64)),
                          minimum(tensor({1.0, NAN}, f64), tensor({NAN, 1.0}, f64))})
    for (double v : t.to_vector<double>()) CHECK(std::isnan(v));
}

TEST_CASE("comparisons broadcast and return bool") {
  auto a = tensor({{1.0, -2.0, 3.0}, {0.5, 0.5, -1.0}}, f64);
  auto b = tensor({0.5, 0.0, 3.0}, f64);
  check_bools(eq(a, b), {0, 0, 1, 1, 0, 0});
  check_bools(ne(a, b), {1, 1, 0, 0, 1, 1});
  check_bools(lt(a, b), {0, 1, 0, 0, 0, 1});
  check_bools(le(a, b), {0, 1, 1, 1, 0, 1});
  check_bools(gt(a, b), {1, 0, 0, 0, 1, 0});
  check_bools(ge(a, b), {1, 0, 1, 1, 1, 0});
  CHECK(lt(a, b).shape() == Shape{2, 3});
  check_bools(eq(tensor({1.0, 2.0, 3.0}, i64), tensor({3.0, 2.0, 1.0}, i64)), {0, 1, 0});
  check_bools(ne(mask({1, 0}), mask({1, 1})), {0, 1});
  // No gradient flows through a comparison.
  auto x = tensor({1.0, 2.0}, f64);
  x.requires_grad_();
  CHECK_FALSE(gt(x, x).requires_grad());
}

TEST_CASE("where broadcasts all three; gradients go to the chosen side") {
  auto cond = mask({1, 0, 1});
  auto a = tensor({{1.0, -2.0, 3.0}, {0.5, 0.5, -1.0}}, f64);
  auto b = reshape(tensor({10.0, 20.0}, f64), {2, 1});
  a.requires_grad_();
  b.requires_grad_();
  auto w = where(cond, a, b);
  CHECK(w.shape() == Shape{2, 3});
  check_values(w, {1.0, 10.0, 3.0, 0.5, 20.0, -1.0});
  w.sum().backward();
  check_values(a.grad(), {1, 0, 1, 1, 0, 1});
  check_values(b.grad(), {1, 1});  // [2,1]: one unchosen element per row
}

TEST_CASE("masked_fill: value where masked, zero gradient there") {
  auto x = tensor({{1.0, -2.0, 3.0}, {0.5, 0.5, -1.0}}, f64);
  x.requires_grad_();
  auto y = masked_fill(x, mask({0, 1, 0}), -7.0);
  CHECK(y.shape() == Shape{2, 3});
  check_values(y, {1.0, -7.0, 3.0, 0.5, -7.0, -1.0});
  y.sum().backward();
  check_values(x.grad(), {1, 0, 1, 1, 0, 1});
}

TEST_CASE("errors name the op and both shapes (shape mismatch) or both dtypes (where they do not promote)") {
  auto a = zeros({2, 3}, {f64});
  auto b = zeros({4}, {f64});
  for (auto [name, call] : std::vector<std::pair<std::string, std::function<Tensor()>>>{
           {"maximum", [&] { return maximum(a, b); }},
           {"minimum", [&] { return minimum(a, b); }},
           {"eq", [&] { return eq(a, b); }},
           {"ge", [&] { return ge(a, b); }},
           {"gelu_backward", [&] { return gelu_backward(a, b); }},
           {"sigmoid_backward", [&] { return sigmoid_backward(a, b); }},
           {"where", [&] {
              return where(zeros({2, 3}, {b8}), a, b);
            }}}) {
    INFO(name);
    std::string message = error_of(call);
    CHECK(contains(message, name + ":"));
    CHECK(contains(message, "[2, 3]"));
    CHECK(contains(message, "[4]"));
  }

  auto f32_tensor = zeros({3}, {f32});
  for (auto [name, call] : std::vector<std::pair<std::string, std::function<Tensor()>>>{
           {"gelu_backward", [&] { return gelu_backward(a, f32_tensor); }},
           {"sigmoid_backward", [&] { return sigmoid_backward(a, f32_tensor); }}}) {
    INFO(name);
    std::string message = error_of(call);
    CHECK(contains(message, name + ":"));
    CHECK(contains(message, "float64"));
    CHECK(contains(message, "float32"));
  }

  CHECK(contains(error_of([] { sqrt(tensor({4.0, 9.0}, i64)); }), "sqrt: expected a floating dtype"));
  CHECK(contains(error_of([] { gelu(tensor({1.0, 2.0}, i64)); }), "gelu: expected a floating dtype"));
  CHECK(contains(error_of([&] { where(a, a, a); }), "where: condition must be bool, got float64"));
}

TEST_CASE("masked_fill errors: non-bool mask, mask that does not fit x") {
  auto x = zeros({2, 3}, {f64});
  std::string message = error_of([&] { masked_fill(x, zeros({2, 3}, {f64}), 1.0); });
  CHECK(contains(message, "masked_fill: mask must be bool, got float64"));
  CHECK(contains(error_of([&] { masked_fill(x, zeros({2, 3}, {i64}), 1.0); }), "got int64"));
  // A mask that would grow the output is rejected, naming both shapes.
  message = error_of([&] { masked_fill(x, zeros({4, 2, 3}, {b8}), 1.0); });
  CHECK(contains(message, "masked_fill"));
  CHECK(contains(message, "[4, 2, 3]"));
  CHECK(contains(message, "[2, 3]"));
  message = error_of([&] { masked_fill(x, zeros({4}, {b8}), 1.0); });
  CHECK(contains(message, "masked_fill"));
  CHECK(contains(message, "[4]"));
}

TEST_CASE("NaN through relu and relu_dropout stays NaN, as in PyTorch; a fully masked softmax row is 0 (not NaN)") {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  for (DType dtype : {f32, f64}) {
    // 40 elements: the vectorized loop and its tail
    std::vector<double> v(40, -1.0);
    v[3] = nan, v[37] = nan, v[5] = -0.0, v[6] = 2.0;
    Tensor out = to_dtype(relu(to_dtype(from_vector<double>(v, {40}), dtype)), f64);
    std::vector<double> r = out.to_vector<double>();
    CHECK(std::isnan(r[3]));
    CHECK(std::isnan(r[37]));
    CHECK((r[5] == 0.0 && !std::signbit(r[5])));  // -0 gives +0
    CHECK(r[6] == 2.0);
    CHECK(r[0] == 0.0);
    Tensor all_nan = relu_dropout(full({64}, nan, {dtype}), 0.5, true);  // kept: NaN; dropped: 0
    const std::vector<double> d = to_dtype(all_nan, f64).to_vector<double>();
    CHECK(std::count_if(d.begin(), d.end(), [](double x) { return std::isnan(x); }) > 0);
    CHECK(std::count_if(d.begin(), d.end(), [](double x) { return x == 0.0; }) > 0);
  }
  // Every entry of a row masked: its weights are 0 (no key to attend to), a deliberate
  // difference from PyTorch's NaN, so a fully padded row cannot poison a batch.
  Tensor row = softmax(tensor({{-inf, -inf}, {0.0, 0.0}}), -1);
  CHECK(row.to_vector<double>() == std::vector<double>{0.0, 0.0, 0.5, 0.5});
}
