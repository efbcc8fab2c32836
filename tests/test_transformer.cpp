// The Transformer: parameter names and counts, masks (the decoder never sees the
// future, padding is invisible), attention maps, and a checkpoint that rebuilds
// the same model. Its configuration: test_transformer_config; decoding: test_decoding.
#include <doctest/doctest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <string>

#include "loom/matmul_precision.h"
#include "loom/models.h"
#include "loom/ops.h"
#include "loom/optim.h"
#include "helpers.h"

using namespace loom;
using loom::testing::error_of;
using loom::testing::expected_parameters;
using loom::testing::ids;
using namespace loom::models;

TEST_CASE("names follow the module tree; shared and tied tables are listed once; the count matches the formula") {
  for (const TransformerConfig& config : {presets::tiny(100), presets::small(1000)}) {
    Generator gen(1);
    Transformer model(config, gen);
    CHECK(model.parameter_count() == expected_parameters(config));
  }
  Generator gen(1);
  Transformer model(presets::tiny(100), gen);
  auto named = model.named_parameters();
  CHECK(named.front().first == "src_embed.weight");
  CHECK(named[1].first == "encoder.layers.0.self_attn.w_q.weight");
  bool has_cross = false, has_tgt = false, has_generator = false;
  for (auto& [name, p] : named) {
    has_cross |= name == "decoder.layers.1.cross_attn.w_o.bias";
    has_tgt |= name == "tgt_embed.weight";
    has_generator |= name == "generator.weight";
  }
  CHECK(has_cross);
  CHECK(!has_tgt);        // shared with the source table
  CHECK(!has_generator);  // tied to it too
  CHECK(model.generator.weight.same(model.src_embed.weight));
  MESSAGE("base preset with a 37000-token joint vocabulary: " << expected_parameters(presets::base(37000))
                                                              << " parameters (the paper reports 65M)");
}

TEST_CASE("the decoder never sees the future; source padding is invisible") {
  Generator gen(2);
  TransformerConfig config = presets::tiny(20);
  config.dropout = 0.0;
  Transformer model(config, gen);
  Tensor src = ids({5, 6, 7, 8, 0, 0, 9, 10, 11, 12, 13, 14}, 2);  // sentence 0 padded with id 0
  Tensor tgt = ids({1, 3, 4, 5, 1, 6, 7, 8}, 2);
  Tensor logits = model(src, tgt);
  CHECK(logits.shape() == Shape{2, 4, 20});

  Tensor tgt_changed = ids({1, 3, 4, 19, 1, 6, 7, 19}, 2);  // only the last position differs
  Tensor src_changed = ids({5, 6, 7, 8, 0, 0, 9, 10, 11, 12, 13, 14}, 2);
  auto a = logits.to_vector<float>(), b = model(src_changed, tgt_changed).to_vector<float>();
  for (int64_t s = 0; s < 2; ++s)
    for (int64_t t = 0; t < 3; ++t)
      for (int64_t v = 0; v < 20; ++v) CHECK(a[(s * 4 + t) * 20 + v] == b[(s * 4 + t) * 20 + v]);

  // What sits under the padding mask does not matter (the pad id is what marks it;
  // here both sentences keep their pads and the visible tokens).
  auto enc1 = model.encode(src);
  auto mask = enc1.src_mask.to_vector<bool>();
  CHECK(mask == std::vector<bool>{false, false, false, false, true, true, false, false, false, false, false, false});
}

TEST_CASE(
    "attention_maps: every layer's weights, rows summing to 1, nothing from the future; the model is left as it was") {
  Generator gen(3);
  TransformerConfig config = presets::tiny(20);
  Transformer model(config, gen);
  const std::vector<int64_t> src = {5, 6, 7, 8, 3}, tgt_in = {2, 9, 10};
  AttentionMaps maps = attention_maps(model, src, tgt_in);
  REQUIRE(maps.encoder_self.size() == 2);
  REQUIRE(maps.decoder_self.size() == 2);
  REQUIRE(maps.cross.size() == 2);
  auto check = [](const Tensor& w, int64_t rows, int64_t cols, bool causal) {
    REQUIRE(w.shape() == Shape{4, rows, cols});
    const std::vector<float> v = w.to_vector<float>();
    for (int64_t h = 0; h < 4; ++h)
      for (int64_t r = 0; r < rows; ++r) {
        double row = 0;
        for (int64_t c = 0; c < cols; ++c) {
          const float x = v[static_cast<size_t>((h * rows + r) * cols + c)];
          row += x;
          if (causal && c > r) CHECK(x == 0.0f);
          if (!causal || c <= r) CHECK(x > 0.0f);
        }
        CHECK(row == doctest::Approx(1.0).epsilon(1e-5));
      }
  };
  for (int64_t l = 0; l < 2; ++l) {
    check(maps.encoder_self[l], 5, 5, false);
    check(maps.decoder_self[l], 3, 3, true);
    check(maps.cross[l], 3, 5, false);
  }
  // The weights are the ones the model's own forward computes (eval mode: no dropout).
  model.eval();
  model.encoder[0]->self_attn.keep_weights(true);
  model(from_vector(src, {1, 5}, {DType::i64}), from_vector(tgt_in, {1, 3}, {DType::i64}));
  CHECK(model.encoder[0]->self_attn.last_weights().reshape({4, 5, 5}).to_vector<float>() ==
        maps.encoder_self[0].to_vector<float>());
  model.encoder[0]->self_attn.keep_weights(false);
  // Left as it was: in training mode (it was built so), weights no longer kept.
  model.train();
  attention_maps(model, src, tgt_in);
  CHECK(model.is_training());
  const Tensor before = model.decoder[1]->cross_attn.last_weights();
  model(from_vector(src, {1, 5}, {DType::i64}), from_vector(tgt_in, {1, 3}, {DType::i64}));
  CHECK(model.decoder[1]->cross_attn.last_weights().same(before));
  CHECK(error_of([&] { attention_maps(model, {}, tgt_in); }).find("attention_maps: the source (0 ids)") !=
        std::string::npos);
}

TEST_CASE("a checkpoint carries the configuration and rebuilds the same model") {
  const std::string path = (std::filesystem::temp_directory_path() / "loom_test_transformer.safetensors").string();
  Generator gen(3);
  TransformerConfig config = presets::tiny(30);
  config.pre_norm = true;
  Transformer model(config, gen);
  model.eval();
  nn::save(model, path, {{"config", config.to_json()}});

  nn::TensorFile file = nn::load_safetensors(path);
  Generator other(99);
  Transformer rebuilt(TransformerConfig::from_json(file.metadata.at("config")), other);
  nn::load(rebuilt, path);
  rebuilt.eval();
  Tensor src = ids({4, 5, 6, 7}, 1), tgt = ids({1, 8, 9}, 1);
  CHECK(model(src, tgt).to_vector<float>() == rebuilt(src, tgt).to_vector<float>());
  std::remove(path.c_str());
}

TEST_CASE(
    "mixed precision: bfloat16 activations and logits, float32 loss, weights and gradients, near float32's step") {
  if (!cpu_bf16_matmul_available()) return;  // bfloat16 products by the reference loop: right but slow
  Generator gen(5);
  TransformerConfig config = presets::tiny(50);
  Transformer model(config, gen);
  const Tensor src = ids({5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}, 2);
  const Tensor tgt_in = ids({2, 20, 21, 22, 23, 2, 30, 31, 32, 33}, 2);
  const Tensor tgt_out = ids({20, 21, 22, 23, 3, 30, 31, 32, 33, 3}, 1).reshape({10});
  const uint64_t dropout_start = gen.offset();
  struct Step {
    double loss;
    DType logits;
    std::vector<Tensor> grads;
  };
  auto step = [&](bool mixed) {
    model.set_mixed_precision(mixed);
    model.zero_grad();
    gen.set_offset(dropout_start);  // the same dropout masks both times
    const Tensor logits = model(src, tgt_in);
    const Tensor loss = label_smoothed_cross_entropy(logits.reshape({10, 50}), tgt_out, 0.1);
    CHECK(loss.dtype() == DType::f32);
    loss.backward();
    Step s{loss.item<double>(), logits.dtype(), {}};
    for (const Tensor& p : model.parameters()) s.grads.push_back(p.grad().detach());
    return s;
  };
  const Step full = step(false), mixed = step(true);
  Step matmuls;  // today's --precision bf16 (bf16 products, float32 activations): it trains as float32 does
  {
    MatmulPrecisionGuard guard(MatmulPrecision::bf16);
    matmuls = step(false);
  }
  CHECK(full.logits == DType::f32);
  CHECK(mixed.logits == DType::bf16);
  CHECK(std::abs(mixed.loss - full.loss) <= 1e-2 * std::abs(full.loss));
  // Each parameter's gradient against float32's, relative error in norm (gradients
  // zero in exact arithmetic, as the key projections' biases', left out): mixed
  // precision's largest no worse than 1.5 times bf16 matmuls' (both are bfloat16
  // roundings through the same layers), and above float32's own rounding (the
  // activations really were bfloat16).
  auto largest_and_smallest_error = [&](const Step& s) {
    double largest = 0, smallest = 1;
    for (size_t i = 0; i < full.grads.size(); ++i) {
      REQUIRE(s.grads[i].dtype() == DType::f32);
      const double norm = std::sqrt(sum(full.grads[i] * full.grads[i]).item<double>());
      if (norm < 1e-4) continue;
      const Tensor diff = s.grads[i] - full.grads[i];
      const double relative = std::sqrt(sum(diff * diff).item<double>()) / norm;
      largest = std::max(largest, relative), smallest = std::min(smallest, relative);
    }
    return std::pair{largest, smallest};
  };
  const auto [mixed_largest, mixed_smallest] = largest_and_smallest_error(mixed);
  const double matmuls_largest = largest_and_smallest_error(matmuls).first;
  MESSAGE("gradients' relative error against float32's: mixed ", mixed_smallest, " to ", mixed_largest,
          ", bf16 matmuls up to ", matmuls_largest);
  CHECK(mixed_largest <= 1.5 * matmuls_largest);
  CHECK(mixed_smallest > 1e-4);
  // Same seed, same bits: the mixed step on one thread gives two threads' gradients.
  const int saved_threads = omp_get_max_threads();
  omp_set_num_threads(1);
  const Step one_thread = step(true);
  omp_set_num_threads(2);
  const Step two_threads = step(true);
  omp_set_num_threads(saved_threads);
  CHECK(one_thread.loss == two_threads.loss);
  for (size_t i = 0; i < one_thread.grads.size(); ++i)
    CHECK(one_thread.grads[i].to_vector<float>() == two_threads.grads[i].to_vector<float>());
  // Evaluation (validation, decoding) runs in the parameters' dtype.
  model.eval();
  CHECK(model(src, tgt_in).dtype() == DType::f32);
  model.train();
  model.set_mixed_precision(false);
}
