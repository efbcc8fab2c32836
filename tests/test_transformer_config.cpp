// The Transformer's configuration: JSON round trips, presets by name, ranges and
// a size bound checked before building, Table 3's choices, old files.
#include <doctest/doctest.h>

#include <string>

#include "loom/models.h"
#include "loom/ops.h"
#include "helpers.h"

using namespace loom;
using loom::testing::error_of;
using loom::testing::expected_parameters;
using loom::testing::ids;
using namespace loom::models;

TEST_CASE("configuration: JSON round trip, presets by name, errors name the field") {
  TransformerConfig c = presets::small(8000);
  c.pre_norm = true;
  TransformerConfig back = TransformerConfig::from_json(c.to_json());
  CHECK(back.to_json() == c.to_json());
  CHECK(presets::by_name("big", 100).d_model == 1024);
  CHECK(error_of([] { presets::by_name("huge", 100); }) == "presets: unknown preset 'huge' (tiny, small, base, big)");
  std::string message = error_of([] { TransformerConfig::from_json(R"({"src_vocab": 10})"); });
  CHECK(message.find("TransformerConfig: cannot read the configuration") != std::string::npos);
  CHECK(message.find("'tgt_vocab' not found") != std::string::npos);
  message = error_of([] { TransformerConfig::from_json(R"({"src_vocab": "ten"})"); });
  CHECK(message.find("(/src_vocab) type must be number") != std::string::npos);
  TransformerConfig bad = presets::tiny(10);
  bad.heads = 3;
  CHECK(error_of([&] { Transformer model(bad); }) ==
        "TransformerConfig: d_model 64 must be a positive multiple of heads 3 (d_ff 256)");
}

TEST_CASE("configuration: every field has a range, and the whole model a size bound, checked before building") {
  auto error_with = [](auto change) {
    TransformerConfig c = presets::tiny(100);
    change(c);
    return error_of([&] { c.validate(); });
  };
  CHECK(error_with([](TransformerConfig& c) { c.max_len = int64_t{1} << 62; }) ==
        "TransformerConfig: max_len must be between 1 and 1048576, got 4611686018427387904");
  // A float where a whole number belongs (6e19 does not fit an int64: the cast was undefined).
  CHECK(error_of([] { TransformerConfig::from_json(R"({"src_vocab": 60000000000000000000, "tgt_vocab": 50})"); }) ==
        "TransformerConfig: src_vocab must be a whole number, got 6e+19");
  CHECK(error_of([] { TransformerConfig::from_json(R"({"src_vocab": 10, "d_model": 16.5})"); }) ==
        "TransformerConfig: d_model must be a whole number, got 16.5");
  CHECK(error_with([](TransformerConfig& c) { c.encoder_layers = 100000; }) ==
        "TransformerConfig: encoder_layers must be between 1 and 1000, got 100000");
  CHECK(error_with([](TransformerConfig& c) { c.heads = 128; }) ==
        "TransformerConfig: heads must be between 1 and 64, got 128");
  CHECK(error_with([](TransformerConfig& c) { c.layer_norm_eps = 0; }) ==
        "TransformerConfig: layer_norm_eps must be above 0 and at most 1, got 0");
  CHECK(error_with([](TransformerConfig& c) { c.layer_norm_eps = std::nan(""); }).find("layer_norm_eps") !=
        std::string::npos);
  CHECK(error_with([](TransformerConfig& c) { c.dropout = std::nan(""); }).find("dropout must be") !=
        std::string::npos);
  // Every field in range, the product not: 1000 layers of width 65536.
  CHECK(error_with([](TransformerConfig& c) {
          c.d_model = c.d_ff = 1 << 16;
          c.encoder_layers = c.decoder_layers = 1000;
        }).find("TransformerConfig: the model would hold about") == 0);
  // The paper's big model passes, and the estimate is close to the real count.
  CHECK(error_with([](TransformerConfig& c) { c = presets::big(37000); }) == "(no error)");
  TransformerConfig small = presets::small(1000);
  Generator gen(1);
  Transformer model(small, gen);
  const double table = static_cast<double>(small.max_len * small.d_model);
  CHECK(small.approximate_elements() - table == doctest::Approx(model.parameter_count()).epsilon(0.01));
}

TEST_CASE(
    "configuration: Table 3's choices (attention, ReLU and residual dropout; learned positions), old files load") {
  // A configuration written before these fields existed: one dropout everywhere, sinusoids.
  const std::string old = R"({"src_vocab":60,"tgt_vocab":60,"d_model":64,"d_ff":256,"heads":4,"encoder_layers":2,)"
                          R"("decoder_layers":2,"dropout":0.3,"max_len":1024,"pad_id":0,"share_embeddings":true,)"
                          R"("pre_norm":false,"layer_norm_eps":1e-06})";
  TransformerConfig c = TransformerConfig::from_json(old);
  CHECK(c.attention_p() == 0.3);
  CHECK(c.relu_p() == 0.3);
  CHECK_FALSE(c.learned_positions);
  c.dropout = 0.2;  // the two follow the residual dropout unless set
  CHECK(c.attention_p() == 0.2);
  c.attention_dropout = 0.05;
  c.relu_dropout = 0.2;
  c.learned_positions = true;
  TransformerConfig back = TransformerConfig::from_json(c.to_json());
  CHECK(back.attention_dropout == 0.05);
  CHECK(back.relu_dropout == 0.2);
  CHECK(back.learned_positions);
  auto error_with = [](auto change) {
    TransformerConfig t = presets::tiny(100);
    change(t);
    return error_of([&] { t.validate(); });
  };
  CHECK(error_with([](TransformerConfig& t) { t.attention_dropout = 1; }) ==
        "TransformerConfig: attention_dropout must be -1 (the dropout's) or at least 0 and below 1, got 1");
  CHECK(error_with([](TransformerConfig& t) { t.relu_dropout = -0.1; }) ==
        "TransformerConfig: relu_dropout must be -1 (the dropout's) or at least 0 and below 1, got -0.1");
  CHECK(error_of([&] {
          TransformerConfig::from_json(old.substr(0, old.size() - 1) + R"(,"learned_positions":"yes"})");
        }).find("(/learned_positions) type must be boolean") != std::string::npos);

  // Each dropout reaches its own place: with only one of them on, training-mode
  // outputs still vary from call to call; with all three off they do not.
  Tensor src = ids({5, 6, 7, 3, 8, 9, 3, 0}, 2), tgt = ids({2, 5, 6, 7, 2, 8, 9, 0}, 2);
  auto varies = [&](double residual, double attention, double relu) {
    TransformerConfig t = presets::tiny(12);
    t.dropout = residual, t.attention_dropout = attention, t.relu_dropout = relu;
    Generator gen(4);
    Transformer model(t, gen);
    NoGradGuard no_grad;
    const auto a = model(src, tgt).to_vector<float>(), b = model(src, tgt).to_vector<float>();
    return a != b;
  };
  CHECK_FALSE(varies(0, 0, 0));
  CHECK(varies(0, 0.5, 0));
  CHECK(varies(0, 0, 0.5));
  CHECK(varies(0.5, 0, 0));
  TransformerConfig t = presets::tiny(12);
  t.relu_dropout = 0.25;
  Transformer model(t);
  CHECK(model.encoder[0]->feed_forward.dropout.p() == 0.25);
  CHECK(model.decoder[1]->dropout.p() == 0.1);

  // Learned positions: a trained [max_len, d_model] table, saved with the model, that gets gradients.
  t = presets::tiny(12);
  t.max_len = 32;
  t.learned_positions = true;
  Generator gen(5);
  Transformer learned(t, gen);
  Tensor table;
  for (auto& [name, p] : learned.named_parameters())
    if (name == "positions.weight") table = p;
  REQUIRE(table.defined());
  CHECK(table.shape() == Shape{32, 64});
  CHECK(learned.parameter_count() == expected_parameters(t) + 32 * 64);
  label_smoothed_cross_entropy(learned(src, tgt), ids({5, 6, 7, 3, 8, 9, 3, 0}, 2), 0.1, 0).backward();
  const auto g = table.grad().to_vector<float>();
  CHECK(std::any_of(g.begin(), g.begin() + 4 * 64, [](float v) { return v != 0; }));  // positions 0-3 were used
  CHECK(std::all_of(g.begin() + 4 * 64, g.end(), [](float v) { return v == 0; }));    // the rest were not
}
