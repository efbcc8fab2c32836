// LOOM_KERNELS=reference: a whole training step runs on the plain reference
// kernels and agrees with the fast kernels.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>

#include "loom/cpu.h"
#include "loom/kernel_profile.h"
#include "loom/kernel_table.h"
#include "loom/matmul_precision.h"
#include "loom/ops.h"
#include "helpers.h"

using namespace loom;
using loom::testing::on_reference_kernels;

namespace {
struct StepResult {
  double loss;
  std::vector<std::vector<float>> grads;
};

// A miniature Transformer block, float32: embedding, layer norm, masked
// self-attention with dropout, a ReLU feed-forward, a tied output projection
// and label-smoothed cross-entropy. At width 8 every product is tiny; at width 64
// (batch 4 x 24 tokens) the projections are large enough for bf16 precision.
StepResult training_step(int64_t d = 8) {
  const int64_t batch = d > 8 ? 4 : 3, time = d > 8 ? 24 : 5, vocab = d > 8 ? 300 : 11;
  Generator init(11);
  const double scale = std::sqrt(8.0 / static_cast<double>(d));  // the logits' size for any width
  const double e = 0.5 * scale, s = 0.3 * scale;
  Tensor emb = randn({vocab, d}, {f32}, init, 0, e);
  Tensor wq = randn({d, d}, {f32}, init, 0, s), wk = randn({d, d}, {f32}, init, 0, s);
  Tensor wv = randn({d, d}, {f32}, init, 0, s), w1 = randn({d, 2 * d}, {f32}, init, 0, s);
  Tensor w2 = randn({2 * d, d}, {f32}, init, 0, s), gamma = ones({d}), beta = zeros({d});
  std::vector<Tensor> params = {emb, wq, wk, wv, w1, w2, gamma, beta};
  for (Tensor& p : params) p.requires_grad_();
  // Token i reads id (7i + 3) mod vocab and predicts the next token's; every fifth is padding.
  std::vector<int64_t> id_values, target_values;
  for (int64_t i = 0; i < batch * time; ++i) {
    id_values.push_back((7 * i + 3) % vocab);
    target_values.push_back(i % 5 == 4 ? -100 : (7 * (i + 1) + 3) % vocab);
  }
  Tensor ids = from_vector<int64_t>(id_values, {batch, time}, {i64});
  Tensor target = from_vector<int64_t>(target_values, {batch * time}, {i64});

  Generator drop(5);
  Tensor x = embedding(emb, ids);  // [B, T, D]
  Tensor h = layer_norm(x, gamma, beta);
  auto heads = [&](const Tensor& w) {  // all tokens as one product, as a Linear multiplies them
    return matmul(h.reshape({batch * time, d}), w).reshape({batch, time, 2, d / 2}).permute({0, 2, 1, 3});
  };
  Tensor attn = scaled_dot_product_attention(heads(wq), heads(wk), heads(wv), causal_mask(time), 0.1, true, drop);
  x = x + attn.permute({0, 2, 1, 3}).reshape({batch, time, d});
  x = x + matmul(dropout(relu(matmul(layer_norm(x, gamma, beta), w1)), 0.1, true, drop), w2);
  Tensor logits = matmul(x, emb.t()).reshape({batch * time, vocab});
  Tensor loss = label_smoothed_cross_entropy(logits, target, 0.1);
  loss.backward();
  StepResult result{loss.item<double>(), {}};
  for (const Tensor& p : params) result.grads.push_back(p.grad().to_vector<float>());
  return result;
}

// One parameter's gradients: the largest |fast - reference| and the largest |reference|.
std::pair<double, double> gradient_difference(const std::vector<float>& fast, const std::vector<float>& reference) {
  double worst = 0, largest = 0;
  for (size_t i = 0; i < fast.size(); ++i) {
    worst = std::max(worst, std::abs(double(fast[i]) - reference[i]));
    largest = std::max(largest, std::abs(double(reference[i])));
  }
  return {worst, largest};
}
}  // namespace

TEST_CASE("a training step on the reference kernels matches the fast kernels") {
  StepResult fast = training_step();
  StepResult reference = on_reference_kernels([] { return training_step(); });
  CHECK(std::isfinite(fast.loss));
  CHECK(fast.loss == doctest::Approx(reference.loss).epsilon(1e-5));
  REQUIRE(fast.grads.size() == reference.grads.size());
  for (size_t p = 0; p < fast.grads.size(); ++p) {
    auto [worst, largest] = gradient_difference(fast.grads[p], reference.grads[p]);
    INFO("parameter ", p, ": max difference ", worst, " (largest gradient ", largest, ")");
    CHECK(largest > 0);  // every parameter is trained
    CHECK(worst <= 1e-5 * (1 + largest));
  }
}

TEST_CASE("LOOM_KERNELS=reference selects the reference kernels at start-up") {
  // ctest runs this binary twice: plain, and with LOOM_KERNELS=reference (tests/CMakeLists.txt).
  const char* env = std::getenv("LOOM_KERNELS");
  bool want_reference = env && std::string(env) == "reference";
  CHECK((kernel_mode() == KernelMode::reference) == want_reference);
}

TEST_CASE("a training step in bf16 matmul precision: the reference kernels match the fast ones, float32 is near") {
  if (!cpu_bf16_matmul_available()) return;
  auto wide_step = [] { return training_step(64); };  // width 8's products are all tiny: float32
  StepResult float32_step = wide_step();
  MatmulPrecisionGuard precision(MatmulPrecision::bf16);
  StepResult fast = wide_step();
  StepResult reference = on_reference_kernels(wide_step);
  CHECK(fast.loss == doctest::Approx(reference.loss).epsilon(1e-5));
  CHECK(fast.loss == doctest::Approx(float32_step.loss).epsilon(1e-2));
  CHECK(fast.loss != float32_step.loss);  // the products did round
  for (size_t p = 0; p < fast.grads.size(); ++p) {
    auto [worst, largest] = gradient_difference(fast.grads[p], reference.grads[p]);
    INFO("parameter ", p, ": max difference ", worst, " (largest gradient ", largest, ")");
    CHECK(worst <= 1e-5 * (1 + largest));
  }
}

TEST_CASE("KernelProfile: each kernel's calls by phase, only while it lives, outermost calls only") {
  Tensor a = randn({8, 16}), b = randn({16, 4});
  a.requires_grad_();
  b.requires_grad_();
  Tensor unprofiled = matmul(a, b);  // before any profile: not counted
  KernelProfile profile;
  Tensor loss = matmul(a, b).sum();
  loss.backward();  // matmul's backward: one product for each input
  {
    KernelPhase phase("optimizer");
    NoGradGuard no_grad;
    Tensor moved = a.detach() * 0.5;
  }
  auto calls = [&](std::string_view kernel, std::string_view phase) {
    int64_t n = 0;
    for (const KernelTime& row : profile.rows())
      if (row.kernel == kernel && row.phase == phase) n += row.calls;
    return n;
  };
  CHECK(calls("matmul", "forward") == 1);
  CHECK(calls("matmul", "backward") == 2);
  CHECK(calls("sum", "forward") == 1);
  CHECK(calls("mul", "optimizer") == 1);
  CHECK(calls("mul", "forward") == 0);
  // BLAS cannot read a stride-0 row: the matmul kernel copies it with the copy kernel,
  // whose time is matmul's own.
  profile.clear();
  Tensor product = matmul(expand(randn({1, 16}), {8, 16}), b.detach());
  CHECK(calls("matmul", "forward") == 1);
  CHECK(calls("copy", "forward") == 0);
  const std::vector<KernelTime> rows = profile.rows();
  for (size_t i = 1; i < rows.size(); ++i) CHECK(rows[i - 1].seconds >= rows[i].seconds);
  CHECK(profile.kernel_seconds() > 0);
  CHECK_THROWS_WITH_AS(KernelProfile{}, doctest::Contains("another profile is already collecting"), Error);
  profile.clear();
  CHECK(profile.rows().empty());
}
