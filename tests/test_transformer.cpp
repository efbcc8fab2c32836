// The Transformer: parameter names and counts, masks (the decoder never sees the
// future, padding is invisible), attention maps, and a checkpoint that rebuilds
// the same model. Its configuration: test_transformer_config; decoding: test_decoding.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <string>

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
