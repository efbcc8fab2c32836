// The C++ API as an outside user writes it, PyTorch-shaped: reductions over one dim
// given as an integer (free functions and methods), the methods PyTorch users reach
// for, cross_entropy with a reduction, and errors that say what to do.
#include <doctest/doctest.h>

#include <cmath>

#include "helpers.h"
#include "loom/ops.h"

using namespace loom;
using loom::testing::error_of;

namespace {
const Tensor x = tensor({{1.0, -2.0, 3.0}, {0.5, 4.0, -1.0}}, f64);

Tensor ids(const std::vector<int64_t>& values) { return from_vector(values, {int64_t(values.size())}); }

bool same(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.to_vector<double>() == b.to_vector<double>();
}
}  // namespace

TEST_CASE("reductions take one dim as an integer, as free functions and as methods") {
  CHECK(same(amax(x, -1), amax(x, Shape{-1})));
  CHECK(same(var(x, -1), var(x, Shape{-1})));
  CHECK(same(sum(x, 1, true), sum(x, Shape{1}, true)));
  CHECK(same(mean(x, 0), mean(x, Shape{0})));
  CHECK(same(logsumexp(x, 1, true), logsumexp(x, Shape{1}, true)));
  CHECK(same(x.amax(-1), amax(x, Shape{-1})));
  CHECK(same(x.sum(1, true), sum(x, Shape{1}, true)));
  CHECK(same(x.var(0), var(x, Shape{0})));
  CHECK(sum(x, 1, true).shape() == Shape{2, 1});
  CHECK(amax(x, -1).to_vector<double>() == std::vector<double>{3.0, 4.0});
  // {} is still "every dim", never dim 0.
  CHECK(sum(x, {}).shape() == Shape{});
  CHECK(x.sum({}).shape() == Shape{});
  CHECK(x.amax({}).item<double>() == 4.0);
  CHECK(same(sum(x, {0, 1}), sum(x)));
}

TEST_CASE("the methods PyTorch users reach for: softmax, log_softmax, pow, exp, log, relu, tanh, abs") {
  CHECK(same(x.softmax(-1), softmax(x, -1)));
  CHECK(same(x.log_softmax(0), log_softmax(x, 0)));
  CHECK(same(x.pow(2), pow(x, 2)));
  CHECK(same(x.exp(), exp(x)));
  CHECK(same(x.abs().log(), log(abs(x))));
  CHECK(same(x.relu(), relu(x)));
  CHECK(same(x.tanh(), tanh(x)));
}

TEST_CASE("cross_entropy with a reduction: none, sum and mean agree with the formula, ignored rows count for nothing") {
  const Tensor logits = tensor({{2.0, 1.0, 0.1}, {0.5, 2.5, 0.3}, {1.0, 1.0, 1.0}, {0.0, 3.0, -1.0}}, f64);
  const Tensor target = ids({0, 1, 2, -100});
  const double eps = 0.1;
  std::vector<double> expected;
  const auto rows = logits.to_vector<double>();
  for (int r = 0; r < 3; ++r) {
    double z = 0;
    for (int v = 0; v < 3; ++v) z += std::exp(rows[3 * r + v]);
    const int t = std::vector<int>{0, 1, 2}[r];
    double smooth = 0;
    for (int v = 0; v < 3; ++v) smooth += -(rows[3 * r + v] - std::log(z)) / 3.0;
    expected.push_back((1 - eps) * -(rows[3 * r + t] - std::log(z)) + eps * smooth);
  }
  expected.push_back(0.0);  // ignored
  const Tensor none = cross_entropy(logits, target, {.reduction = Reduction::none, .label_smoothing = eps});
  REQUIRE(none.shape() == Shape{4});
  const auto got = none.to_vector<double>();
  for (size_t i = 0; i < 4; ++i) CHECK(got[i] == doctest::Approx(expected[i]).epsilon(1e-12));
  const double total = expected[0] + expected[1] + expected[2];
  CHECK(cross_entropy(logits, target, {.reduction = Reduction::sum, .label_smoothing = eps}).item<double>() ==
        doctest::Approx(total).epsilon(1e-12));
  CHECK(cross_entropy(logits, target, {.label_smoothing = eps}).item<double>() ==
        doctest::Approx(total / 3).epsilon(1e-12));
  CHECK(error_of([&] {
          cross_entropy(logits, ids({0, 1, 3, 0}), {.reduction = Reduction::none});
        }).find("cross_entropy: target id 3 (at flat position 2) is out of range for V = 3") == 0);
}

TEST_CASE("embedding with its arguments swapped says so") {
  const Tensor weight = randn({10, 4}, {.dtype = f64});
  const Tensor tokens = ids({1, 2, 3});
  const std::string message = error_of([&] { embedding(tokens, weight); });
  CHECK(message.find("embedding: the arguments are (weight, ids)") == 0);
  CHECK(message.find("swap them") != std::string::npos);
  CHECK(embedding(weight, tokens).shape() == Shape{3, 4});
}

TEST_CASE("reading .grad() before any backward: the error names the user's line and the cause") {
  Tensor w = randn({3}, {.dtype = f64});
  w.requires_grad_();
  CHECK_FALSE(w.grad().defined());
  const std::string message = error_of([&] { Tensor scaled = w.grad() * 2.0; });
  CHECK(message.find("tensor: use of an undefined tensor in the op called at ") == 0);
  CHECK(message.find("test_api.cpp") != std::string::npos);
  CHECK(message.find("no backward has reached yet") != std::string::npos);
  // Outside any op call: the cause without a line.
  CHECK(error_of([&] { (void)w.grad().shape(); }).find("tensor: use of an undefined tensor: ") == 0);
}
