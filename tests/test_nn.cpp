// nn: Module's parameter registry (names, order, sharing, train/eval), each
// layer's forward against its formula, and gradients through a whole
// multi-head attention block against finite differences.
#include <doctest/doctest.h>

#include <cmath>
#include <memory>
#include <stdexcept>
#include <string>

#include "loom/gradcheck.h"
#include "loom/nn.h"
#include "loom/ops.h"
#include "helpers.h"

using namespace loom;
using loom::testing::error_of;
using namespace loom::nn;

namespace {

// Two attention blocks in a list and a shared final projection: nested names.
struct Stack : Module {
  std::vector<std::unique_ptr<MultiHeadAttention>> layers;
  LayerNorm norm{8};
  Stack() {
    for (int i = 0; i < 2; ++i) {
      layers.push_back(std::make_unique<MultiHeadAttention>(8, 2, 0.1));
      register_module("layers." + std::to_string(i), *layers.back());
    }
    register_module("norm", norm);
  }
};
}  // namespace

TEST_CASE("Module: hierarchical names in registration order, counts, train/eval reach every child") {
  Stack stack;
  auto named = stack.named_parameters();
  REQUIRE(named.size() == 2 * 8 + 2);
  CHECK(named[0].first == "layers.0.w_q.weight");
  CHECK(named[1].first == "layers.0.w_q.bias");
  CHECK(named[7].first == "layers.0.w_o.bias");
  CHECK(named[8].first == "layers.1.w_q.weight");
  CHECK(named[16].first == "norm.weight");
  CHECK(named[17].first == "norm.bias");
  CHECK(stack.parameter_count() == 2 * 4 * (8 * 8 + 8) + 2 * 8);
  for (auto& [name, p] : named) CHECK(p.requires_grad());

  CHECK(stack.layers[1]->is_training());
  stack.eval();
  CHECK(!stack.layers[1]->is_training());
  CHECK(!stack.layers[1]->w_q.is_training());
  stack.train();
  CHECK(stack.layers[0]->w_o.is_training());
}

TEST_CASE("EvalModeGuard: eval mode for a scope, the training ones restored, also after an error") {
  Stack training, evaluating;
  evaluating.eval();
  {
    EvalModeGuard guard(std::vector<Module*>{&training, &evaluating});
    CHECK(!training.layers[0]->w_q.is_training());
    CHECK(!evaluating.is_training());
  }
  CHECK(training.layers[0]->w_q.is_training());
  CHECK(!evaluating.layers[0]->w_q.is_training());  // was in eval mode: left there
  try {
    EvalModeGuard guard(training);
    throw std::runtime_error("an error inside the scope");
  } catch (const std::runtime_error&) {
  }
  CHECK(training.is_training());
}

TEST_CASE("Module: a name registered twice is an error; a shared parameter is listed once") {
  struct Twice : Module {
    Tensor a;
    Twice() {
      register_parameter("a", a, ones({2}));
      register_parameter("a", a, ones({2}));
    }
  };
  CHECK(error_of([] { Twice t; }).find("Module: the name 'a' is registered twice") != std::string::npos);

  struct Tied : Module {
    Embedding embed{10, 4};
    Linear out{4, 10, false};
    Tied() {
      register_module("embed", embed);
      out.weight = embed.weight;  // the output projection shares the embedding table
      register_module("out", out);
    }
  };
  Tied tied;
  auto named = tied.named_parameters();
  REQUIRE(named.size() == 1);
  CHECK(named[0].first == "embed.weight");
}

TEST_CASE("Linear: y = x W^T + b over any leading dims; a wrong width names both") {
  Generator gen(3);
  Linear layer(3, 2, true, gen, {f64});
  CHECK(layer.weight.shape() == Shape{2, 3});
  {
    NoGradGuard no_grad;
    copy_(layer.bias, tensor({0.5, -1.0}, f64));
  }
  Tensor x = randn({4, 5, 3}, {f64}, gen);
  Tensor y = layer(x);
  CHECK(y.shape() == Shape{4, 5, 2});
  auto xv = x.to_vector<double>(), wv = layer.weight.to_vector<double>(), yv = y.to_vector<double>();
  for (int64_t r = 0; r < 20; ++r)
    for (int64_t o = 0; o < 2; ++o) {
      double expected = o == 0 ? 0.5 : -1.0;
      for (int64_t i = 0; i < 3; ++i) expected += xv[r * 3 + i] * wv[o * 3 + i];
      CHECK(yv[r * 2 + o] == doctest::Approx(expected).epsilon(1e-14));
    }
  // Xavier bound sqrt(6 / (3 + 2)).
  for (double w : wv) CHECK(std::abs(w) <= std::sqrt(6.0 / 5.0));
  CHECK(error_of([&] {
          layer(randn({4, 4}, {f64}, gen));
        }) == "Linear(3 -> 2): input of shape [4, 4] must end in 3 features");
}

TEST_CASE("Embedding: rows of the table; the padding row starts at zero and gets no gradient") {
  Generator gen(5);
  Embedding embed(6, 4, /*padding_idx=*/0, gen, {f64});
  auto table = embed.weight.to_vector<double>();
  for (int j = 0; j < 4; ++j) CHECK(table[j] == 0.0);
  Tensor ids = from_vector<int64_t>({2, 0, 5}, {3}, {DType::i64});
  Tensor y = embed(ids);
  CHECK(y.shape() == Shape{3, 4});
  auto yv = y.to_vector<double>();
  for (int j = 0; j < 4; ++j) CHECK(yv[j] == table[2 * 4 + j]);
  sum(y).backward();
  auto g = embed.weight.grad().to_vector<double>();
  for (int j = 0; j < 4; ++j) {
    CHECK(g[0 * 4 + j] == 0.0);  // padding
    CHECK(g[2 * 4 + j] == 1.0);
    CHECK(g[1 * 4 + j] == 0.0);  // unused
  }
  CHECK(error_of([&] {
          embed(from_vector<int64_t>({6}, {1}, {DType::i64}));
        }).find("embedding: id 6 is out of range for a vocabulary of 6") != std::string::npos);
}

TEST_CASE("LayerNorm: zero mean and unit variance per row before weight and bias") {
  Generator gen(7);
  LayerNorm norm(16, 1e-5, {f64});
  Tensor y = norm(randn({3, 16}, {f64}, gen, 2.0, 3.0));
  auto v = y.to_vector<double>();
  for (int r = 0; r < 3; ++r) {
    double mean = 0, sq = 0;
    for (int j = 0; j < 16; ++j) mean += v[r * 16 + j] / 16;
    for (int j = 0; j < 16; ++j) sq += (v[r * 16 + j] - mean) * (v[r * 16 + j] - mean) / 16;
    CHECK(std::abs(mean) < 1e-12);
    CHECK(sq == doctest::Approx(1.0).epsilon(1e-5));  // eps = 1e-5 against variance 9
  }
}

TEST_CASE("Dropout and PositionalEncoding: identity in eval; the paper's sinusoids") {
  Generator gen(9);
  Dropout drop(0.5, gen);
  Tensor x = ones({1000});
  Tensor trained = drop(x);
  auto tv = trained.to_vector<float>();
  int64_t zeros_seen = 0;
  for (float v : tv) {
    CHECK((v == 0.0f || v == 2.0f));
    zeros_seen += v == 0.0f;
  }
  CHECK(zeros_seen > 400);
  CHECK(zeros_seen < 600);
  drop.eval();
  CHECK(drop(x).to_vector<float>() == x.to_vector<float>());

  PositionalEncoding pe(6, 0.0, 50, gen, {f64});
  auto t = pe.table().to_vector<double>();
  CHECK(t[0] == 0.0);                                 // sin(0)
  CHECK(t[1] == 1.0);                                 // cos(0)
  CHECK(t[6 + 0] == doctest::Approx(std::sin(1.0)));  // pos 1, i 0
  CHECK(t[6 + 1] == doctest::Approx(std::cos(1.0)));
  CHECK(t[7 * 6 + 2] == doctest::Approx(std::sin(7.0 / std::pow(10000.0, 2.0 / 6))));
  CHECK(t[7 * 6 + 5] == doctest::Approx(std::cos(7.0 / std::pow(10000.0, 4.0 / 6))));
  Tensor y = pe(zeros({2, 3, 6}, {f64}));
  auto yv = y.to_vector<double>();
  for (int j = 0; j < 18; ++j) CHECK(yv[18 + j] == t[j]);  // the same table for every sentence
  CHECK(error_of([&] {
          pe(zeros({1, 51, 6}, {f64}));
        }) == "PositionalEncoding: positions 0 to 50 do not fit max_len 50");
  // Starting later (a decoder fed one token at a time) picks the later rows.
  auto later = pe(zeros({1, 2, 6}, {f64}), 7).to_vector<double>();
  for (int j = 0; j < 12; ++j) CHECK(later[j] == t[7 * 6 + j]);
  CHECK(error_of([&] {
          pe(zeros({1, 2, 6}, {f64}), 49);
        }) == "PositionalEncoding: positions 49 to 50 do not fit max_len 50");
}

TEST_CASE("MultiHeadAttention: causal mask hides the future; weights are rows of probabilities; gradcheck") {
  Generator gen(11);
  MultiHeadAttention attn(8, 2, 0.0, gen, {f64});
  attn.keep_weights(true);
  Tensor x = randn({2, 5, 8}, {f64}, gen);
  Tensor mask = causal_mask(5);
  Tensor y = attn(x, x, x, mask);
  CHECK(y.shape() == Shape{2, 5, 8});

  // Changing the last position changes no earlier output.
  Tensor x2 = x.clone();
  {
    NoGradGuard no_grad;
    fill_(x2.narrow(1, 4, 1), 3.0);
  }
  auto a = y.to_vector<double>(), b = attn(x2, x2, x2, mask).to_vector<double>();
  for (int64_t s = 0; s < 2; ++s)
    for (int64_t t = 0; t < 4; ++t)
      for (int64_t d = 0; d < 8; ++d)
        CHECK(a[(s * 5 + t) * 8 + d] == doctest::Approx(b[(s * 5 + t) * 8 + d]).epsilon(1e-14));

  Tensor w = attn.last_weights();
  CHECK(w.shape() == Shape{2, 2, 5, 5});
  auto wv = w.to_vector<double>();
  for (int64_t row = 0; row < 2 * 2 * 5; ++row) {
    const int64_t t = row % 5;
    double total = 0;
    for (int64_t k = 0; k < 5; ++k) {
      total += wv[row * 5 + k];
      if (k > t) CHECK(wv[row * 5 + k] == 0.0);
    }
    CHECK(total == doctest::Approx(1.0).epsilon(1e-14));
  }

  // d output / d input (query = key = value) against central differences.
  Tensor small = randn({1, 3, 8}, {f64}, gen);
  small.requires_grad_();
  CheckResult r = gradcheck(
      [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{attn(in[0], in[0], in[0], causal_mask(3))}; },
      {small});
  CHECK_MESSAGE(r.passed, r.message);

  CHECK(error_of([&] { MultiHeadAttention bad(10, 3); }) ==
        "MultiHeadAttention: d_model 10 must be a positive multiple of the number of heads 3");
  CHECK(error_of([&] {
          attn(x, randn({2, 5, 4}, {f64}, gen), x);
        }) == "MultiHeadAttention: key must be [batch, time, 8], got shape [2, 5, 4]");
}

TEST_CASE("SkipInit: initializers draw nothing while it lives (a model about to be loaded), and draw again after") {
  Generator gen(13);
  {
    SkipInit loaded_next;
    Linear proj(4, 3, true, gen);
    Embedding table(10, 4, 0, gen);
    PositionalEncoding learned(4, 0.0, 8, gen, {}, /*learned=*/true);
    CHECK(gen.offset() == 0);  // no random numbers drawn
    CHECK(proj.weight.shape() == Shape{3, 4});
    CHECK(table.weight.shape() == Shape{10, 4});
    { SkipInit nested; }
    Linear still_skipped(4, 3, true, gen);  // the inner guard restored the outer's setting
    CHECK(gen.offset() == 0);
  }
  Linear drawn(4, 3, true, gen);
  CHECK(gen.offset() > 0);
  Generator same(13);
  CHECK(drawn.weight.to_vector<float>() == Linear(4, 3, true, same).weight.to_vector<float>());
}
