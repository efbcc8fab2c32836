// The Transformer: parameter names and counts, masks (the decoder never sees
// the future, padding is invisible), configuration round trips, a checkpoint
// that rebuilds the same model, and a tiny model that learns to copy sentences.
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
using namespace loom::models;

namespace {
Tensor ids(const std::vector<int64_t>& values, int64_t batch) {
  return from_vector(values, {batch, static_cast<int64_t>(values.size()) / batch}, {DType::i64});
}

// Parameters of a post-norm Transformer with shared, tied embeddings, counted by hand.
int64_t expected_parameters(const TransformerConfig& c) {
  const int64_t d = c.d_model, attention = 4 * (d * d + d), ff = 2 * d * c.d_ff + c.d_ff + d, norm = 2 * d;
  return c.src_vocab * d + c.encoder_layers * (attention + ff + 2 * norm) +
         c.decoder_layers * (2 * attention + ff + 3 * norm);
}
}  // namespace

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

TEST_CASE("attention_maps: every layer's weights, rows summing to 1, nothing from the future; the model is left as it was") {
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
  CHECK(error_with([](TransformerConfig& c) { c.dropout = std::nan(""); }).find("dropout must be") != std::string::npos);
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

TEST_CASE("configuration: Table 3's choices (attention, ReLU and residual dropout; learned positions), old files load") {
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
  CHECK(error_of([&] { TransformerConfig::from_json(old.substr(0, old.size() - 1) + R"(,"learned_positions":"yes"})"); })
            .find("(/learned_positions) type must be boolean") != std::string::npos);

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

namespace {
double max_abs_diff(const Tensor& a, const Tensor& b) {
  REQUIRE(a.shape() == b.shape());
  auto x = a.contiguous().to_vector<float>(), y = b.contiguous().to_vector<float>();
  double m = 0;
  for (size_t i = 0; i < x.size(); ++i) m = std::max(m, static_cast<double>(std::abs(x[i] - y[i])));
  return m;
}

std::vector<Hypothesis> best_of(const std::vector<std::vector<Hypothesis>>& nbest) {
  std::vector<Hypothesis> best;
  for (const auto& hyps : nbest) best.push_back(hyps.at(0));
  return best;
}

// decode_step against decode's last position, then greedy and beam search (beam 1,
// 4 and its 4-best, alpha 0 and 0.6, cut short and long) against their references:
// the same tokens, scores equal to float rounding. Returns the longest output seen.
size_t check_cached_decoding(Transformer& model, const Tensor& src, int64_t bos, int64_t eos) {
  size_t longest = 0;
  NoGradGuard no_grad;
  model.eval();
  {
    // Three steps over 2 rows per sentence, reordered between steps.
    Transformer::Encoded encoded = model.encode(src);
    const int64_t batch = src.shape()[0];
    Transformer::DecoderState state = model.start_decoding(encoded);
    std::vector<int64_t> rows;  // sentence b's rows: 2b, 2b + 1
    for (int64_t b = 0; b < batch; ++b) rows.insert(rows.end(), {b, b});
    state.select(rows);
    std::vector<std::vector<int64_t>> prefixes(2 * batch, std::vector<int64_t>{bos});
    for (int64_t step = 0; step < 3; ++step) {
      std::vector<int64_t> last, flat, sentence;
      for (const auto& p : prefixes) last.push_back(p.back());
      for (const auto& p : prefixes) flat.insert(flat.end(), p.begin(), p.end());
      for (int64_t b = 0; b < batch; ++b) sentence.insert(sentence.end(), {b, b});
      Tensor cached = model.decode_step(state, ids(last, 2 * batch).reshape({2 * batch}));
      Tensor index = ids(sentence, 2 * batch).reshape({2 * batch});
      Transformer::Encoded rows_encoded{index_select(encoded.memory, 0, index), index_select(encoded.src_mask, 0, index)};
      Tensor full = model.decode(rows_encoded, ids(flat, 2 * batch)).select(1, step);
      CHECK(max_abs_diff(cached, full) < 1e-4);
      // Swap each sentence's two rows, and extend them by different tokens.
      std::vector<int64_t> swapped;
      for (int64_t b = 0; b < batch; ++b) swapped.insert(swapped.end(), {2 * b + 1, 2 * b});
      state.select(swapped);
      std::vector<std::vector<int64_t>> next;
      for (int64_t i : swapped) next.push_back(prefixes[i]);
      for (size_t i = 0; i < next.size(); ++i) next[i].push_back(3 + static_cast<int64_t>(i % 2) + step);
      prefixes = next;
    }
    CHECK(error_of([&] { state.select({2 * batch}); }) ==
          fmt::format("DecoderState::select: row {} of {} does not exist", 2 * batch, 2 * batch));
  }
  for (int64_t max_len : {3, 12, 40}) {  // 40: the self-attention cache grows past its first 16 positions
    CAPTURE(max_len);
    Tensor fast = greedy_decode(model, src, bos, eos, max_len), slow = greedy_decode_reference(model, src, bos, eos, max_len);
    CHECK(fast.shape() == slow.shape());
    CHECK(fast.to_vector<int64_t>() == slow.to_vector<int64_t>());
    for (BeamOptions o : {BeamOptions{.beam = 1, .length_penalty = 0.0, .max_len = max_len},
                          BeamOptions{.beam = 4, .length_penalty = 0.6, .max_len = max_len, .nbest = 4},
                          BeamOptions{.beam = 4, .length_penalty = 0.0, .max_len = max_len, .nbest = 2}}) {
      CAPTURE(o.beam);
      CAPTURE(o.length_penalty);
      auto cached = beam_search(model, src, bos, eos, o), reference = beam_search_reference(model, src, bos, eos, o);
      REQUIRE(cached.size() == reference.size());
      for (size_t b = 0; b < cached.size(); ++b) {
        REQUIRE(cached[b].size() == reference[b].size());
        CHECK(static_cast<int64_t>(cached[b].size()) <= o.nbest);
        for (size_t k = 0; k < cached[b].size(); ++k) {
          CHECK(cached[b][k].tokens == reference[b][k].tokens);
          longest = std::max(longest, cached[b][k].tokens.size());
          CHECK(cached[b][k].log_prob == doctest::Approx(reference[b][k].log_prob).epsilon(1e-5));
          CHECK(cached[b][k].score == doctest::Approx(reference[b][k].score).epsilon(1e-5));
          if (k > 0) CHECK(cached[b][k].score <= cached[b][k - 1].score);
        }
      }
    }
  }
  return longest;
}
}  // namespace

TEST_CASE("a tiny Transformer learns to copy sentences (Adam + Noam, label smoothing, greedy decoding)") {
  const int64_t vocab = 13, pad = 0, bos = 1, eos = 2, batch = 32, len = 6;
  TransformerConfig config = presets::tiny(vocab);
  config.d_model = 32;
  config.d_ff = 64;
  config.dropout = 0.0;
  Generator init(4), data(5);
  Transformer model(config, init);
  optim::Adam adam(model.parameters(), {.lr = 0, .betas = {0.9, 0.98}, .eps = 1e-9});
  optim::Noam noam(adam, config.d_model, /*warmup=*/50, /*factor=*/0.3);  // peak lr 0.0075

  // A batch of random sentences of 3..len tokens from 3..vocab-1, padded; target = source.
  auto make_batch = [&](Tensor& src, Tensor& tgt_in, Tensor& tgt_out) {
    auto r = rand({batch, len + 1}, {DType::f64}, data).to_vector<double>();
    std::vector<int64_t> s, ti, to;
    for (int64_t b = 0; b < batch; ++b) {
      const int64_t n = 3 + static_cast<int64_t>(r[b * (len + 1)] * (len - 2));
      std::vector<int64_t> sentence;
      for (int64_t i = 0; i < n; ++i) sentence.push_back(3 + static_cast<int64_t>(r[b * (len + 1) + 1 + i] * (vocab - 3)));
      for (int64_t i = 0; i <= len; ++i) s.push_back(i < n ? sentence[i] : i == n ? eos : pad);
      for (int64_t i = 0; i <= len; ++i) ti.push_back(i == 0 ? bos : i - 1 < n ? sentence[i - 1] : i - 1 == n ? eos : pad);
      for (int64_t i = 0; i <= len; ++i) to.push_back(i < n ? sentence[i] : i == n ? eos : pad);
    }
    src = ids(s, batch);
    tgt_in = ids(ti, batch);
    tgt_out = ids(to, batch);
  };

  double first_loss = 0, loss_value = 0;
  for (int step = 0; step < 250; ++step) {
    Tensor src, tgt_in, tgt_out;
    make_batch(src, tgt_in, tgt_out);
    Tensor loss = label_smoothed_cross_entropy(model(src, tgt_in), tgt_out, 0.1, pad);
    adam.zero_grad();
    loss.backward();
    noam.step();
    adam.step();
    loss_value = loss.item<double>();
    if (step == 0) first_loss = loss_value;
  }
  Tensor src, tgt_in, tgt_out;
  make_batch(src, tgt_in, tgt_out);
  Tensor decoded = greedy_decode(model, src, bos, eos, len + 1);
  auto got = decoded.to_vector<int64_t>(), want = tgt_out.to_vector<int64_t>();
  const int64_t width = decoded.shape()[1];
  int64_t exact = 0;
  for (int64_t b = 0; b < batch; ++b) {
    bool same = true;
    for (int64_t i = 0; i <= len && i + 1 < width; ++i) {
      same = same && got[b * width + i + 1] == want[b * (len + 1) + i];
      if (want[b * (len + 1) + i] == eos) break;
    }
    exact += same;
  }
  MESSAGE("copy task: loss " << first_loss << " -> " << loss_value << ", " << exact << "/" << batch
                             << " sentences decoded exactly");
  CHECK(loss_value < 0.3 * first_loss);
  CHECK(exact >= batch * 3 / 4);

  // Beam search: beam 1 is greedy decoding, except that its last allowed token is
  // eos (greedy stops at max_len with whatever comes); beam 4 copies too.
  auto one = best_of(beam_search(model, src, bos, eos, {.beam = 1, .length_penalty = 0.0, .max_len = len + 1}));
  auto four = best_of(beam_search(model, src, bos, eos, {.beam = 4, .length_penalty = 0.6, .max_len = len + 1}));
  int64_t beam_exact = 0;
  for (int64_t b = 0; b < batch; ++b) {
    std::vector<int64_t> greedy_tokens;
    for (int64_t i = 1; i < width; ++i) {
      greedy_tokens.push_back(got[b * width + i]);
      if (got[b * width + i] == eos) break;
    }
    if (greedy_tokens.back() != eos && static_cast<int64_t>(greedy_tokens.size()) == len + 1) greedy_tokens.back() = eos;
    CHECK(one[b].tokens == greedy_tokens);
    std::vector<int64_t> wanted;
    for (int64_t i = 0; i <= len; ++i) {
      wanted.push_back(want[b * (len + 1) + i]);
      if (wanted.back() == eos) break;
    }
    beam_exact += four[b].tokens == wanted;
    CHECK(four[b].score >= one[b].log_prob / std::pow((5.0 + one[b].tokens.size()) / 6.0, 0.6) - 1e-5);
  }
  MESSAGE("beam 4: " << beam_exact << "/" << batch << " sentences copied exactly");
  CHECK(beam_exact >= batch * 3 / 4);

  SUBCASE("the cached decoders give the reference decoders' tokens") { check_cached_decoding(model, src, bos, eos); }
}

TEST_CASE("the cached decoders give the reference decoders' tokens on untrained models (post- and pre-norm)") {
  for (bool pre_norm : {false, true}) {
    CAPTURE(pre_norm);
    TransformerConfig config = presets::tiny(11);
    config.pre_norm = pre_norm;
    Generator init(pre_norm ? 8 : 9);
    Transformer model(config, init);
    Generator data(3);
    // 6 sentences of 2..7 tokens, padded: sentences finish at different steps.
    auto r = rand({6, 8}, {DType::f64}, data).to_vector<double>();
    std::vector<int64_t> s;
    for (int64_t b = 0; b < 6; ++b)
      for (int64_t i = 0; i < 8; ++i) s.push_back(i < 2 + b ? 3 + static_cast<int64_t>(r[b * 8 + i] * 8) : i == 2 + b ? 2 : 0);
    CHECK(check_cached_decoding(model, ids(s, 6), 1, 2) > 16);  // past the cache's first capacity
  }
}

// A distribution written by hand where the greedy choice is a trap:
//   after bos: A 0.6, B 0.4;  after A: A, B, eos 1/3 each;  after B: eos 0.9, A 0.05, B 0.05
// greedy: A then eos (p = 0.2); beam 2: B eos (p = 0.36). Length penalty
// alpha = 0 compares raw probabilities.
TEST_CASE("beam search finds the likelier sentence greedy decoding misses") {
  const int64_t bos = 1, eos = 2, A = 3, B = 4, V = 5;
  auto scorer = [&](const BeamStep& step) {
    std::vector<float> out;
    for (const auto& p : step.prefixes) {
      std::vector<double> probs(V, 0.0);
      const int64_t last = p.back();
      if (last == bos) probs[A] = 0.6, probs[B] = 0.4;
      else if (last == A) probs[A] = probs[B] = probs[eos] = 1.0 / 3;
      else probs[eos] = 0.9, probs[A] = probs[B] = 0.05;
      for (double q : probs) out.push_back(static_cast<float>(std::log(q)));
    }
    return out;
  };
  auto greedy = best_of(beam_search(scorer, 1, V, bos, eos, {.beam = 1, .length_penalty = 0.0, .max_len = 5}));
  auto beam = best_of(beam_search(scorer, 1, V, bos, eos, {.beam = 2, .length_penalty = 0.0, .max_len = 5}));
  CHECK(greedy[0].tokens == std::vector<int64_t>{A, eos});
  CHECK(greedy[0].log_prob == doctest::Approx(std::log(0.6 / 3)).epsilon(1e-6));
  CHECK(beam[0].tokens == std::vector<int64_t>{B, eos});
  CHECK(beam[0].log_prob == doctest::Approx(std::log(0.36)).epsilon(1e-6));
  // Two sentences at once give the same answers as one at a time.
  auto both = best_of(beam_search(scorer, 2, V, bos, eos, {.beam = 2, .length_penalty = 0.0, .max_len = 5}));
  CHECK(both[1].tokens == beam[0].tokens);
  CHECK(error_of([&] { beam_search(scorer, 1, V, bos, 7, {}); }) ==
        "beam_search: bos 1 and eos 7 must be ids of the vocabulary of 5");
}

// A sentence that would go on forever (A 0.9, eos 0.1 after every prefix; beam 2): the
// max_len-th token is eos, so the longest hypothesis is scored with its eos like the
// others. With alpha 2 it wins: A A eos, p = 0.081, score log 0.081 / (8/6)^2 = -1.41,
// against eos (-2.30) and A eos (-1.77); unfinished, A A A (p 0.729) would have won.
TEST_CASE("beam search ends every hypothesis with eos, forced at max_len") {
  const int64_t bos = 1, eos = 2, A = 3, V = 4;
  auto scorer = [&](const BeamStep& step) {
    std::vector<float> out;
    for (size_t i = 0; i < step.prefixes.size(); ++i)
      for (double q : {0.0, 0.0, 0.1, 0.9}) out.push_back(static_cast<float>(std::log(q)));
    return out;
  };
  auto all = beam_search(scorer, 1, V, bos, eos, {.beam = 2, .length_penalty = 2.0, .max_len = 3, .nbest = 2});
  CHECK(all[0][0].tokens == std::vector<int64_t>{A, A, eos});
  CHECK(all[0][0].log_prob == doctest::Approx(std::log(0.081)).epsilon(1e-6));
  CHECK(all[0][0].score == doctest::Approx(std::log(0.081) / std::pow(8.0 / 6, 2.0)).epsilon(1e-6));
  CHECK(all[0][1].tokens == std::vector<int64_t>{A, eos});
  auto plain = beam_search(scorer, 1, V, bos, eos, {.beam = 2, .length_penalty = 0.0, .max_len = 3});
  CHECK(plain[0][0].tokens == std::vector<int64_t>{eos});  // alpha 0: the likeliest whole sentence
}
