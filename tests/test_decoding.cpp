// Decoding: a tiny model that learns to copy sentences (greedy), the cached
// decoders against the reference ones, and beam search.
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
using loom::testing::ids;
using namespace loom::models;

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

// A scorer from a hand-written distribution over the next token of each prefix.
NextTokenScorer scorer_of(int64_t V, const std::function<std::vector<double>(const std::vector<int64_t>&)>& probs_of) {
  return [V, probs_of](const BeamStep& step) {
    std::vector<float> out;
    for (const auto& prefix : step.prefixes)
      for (double q : probs_of(prefix)) out.push_back(static_cast<float>(std::log(q)));
    return from_vector(out, {static_cast<int64_t>(step.prefixes.size()), V});
  };
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
      Transformer::Encoded rows_encoded{index_select(encoded.memory, 0, index),
                                        index_select(encoded.src_mask, 0, index)};
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
  {
    // A sentence's rows query its source together while every sentence has as many
    // rows (two here), one by one otherwise (a third row for sentence 0, last): the
    // same bits for each row either way.
    Transformer::Encoded encoded = model.encode(src);
    const int64_t batch = src.shape()[0];
    REQUIRE(batch >= 2);
    PackedWeights packed(decoding_weights(model));  // as decoding runs: a row's products independent of the others
    Transformer::DecoderState grouped = model.start_decoding(encoded), one_by_one = model.start_decoding(encoded);
    std::vector<int64_t> pairs, tokens;
    for (int64_t b = 0; b < batch; ++b) pairs.insert(pairs.end(), {b, b}), tokens.insert(tokens.end(), {3, 4});
    std::vector<int64_t> uneven = pairs, uneven_tokens = tokens;
    uneven.push_back(0), uneven_tokens.push_back(5);
    grouped.select(pairs);
    one_by_one.select(uneven);
    for (int64_t step = 0; step < 3; ++step) {
      const Tensor a = model.decode_step(grouped, ids(tokens, 1).reshape({2 * batch}));
      const Tensor b = model.decode_step(one_by_one, ids(uneven_tokens, 1).reshape({2 * batch + 1}));
      CHECK(a.to_vector<float>() == b.narrow(0, 0, 2 * batch).to_vector<float>());
    }
  }
  for (int64_t max_len : {3, 12, 40}) {  // 40: the self-attention cache grows 4 times (capacity 4 to 64)
    CAPTURE(max_len);
    Tensor fast = greedy_decode(model, src, bos, eos, max_len),
           slow = greedy_decode_reference(model, src, bos, eos, max_len);
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
      for (int64_t i = 0; i < n; ++i)
        sentence.push_back(3 + static_cast<int64_t>(r[b * (len + 1) + 1 + i] * (vocab - 3)));
      for (int64_t i = 0; i <= len; ++i) s.push_back(i < n ? sentence[i] : i == n ? eos : pad);
      for (int64_t i = 0; i <= len; ++i)
        ti.push_back(i == 0 ? bos : i - 1 < n ? sentence[i - 1] : i - 1 == n ? eos : pad);
      for (int64_t i = 0; i <= len; ++i) to.push_back(i < n ? sentence[i] : i == n ? eos : pad);
    }
    src = ids(s, batch);
    tgt_in = ids(ti, batch);
    tgt_out = ids(to, batch);
  };

  // 400 steps: release copies 29-32/32 at any of 300-500, so the task is learned by
  // then with room to spare. Under a sanitizer 40 steps run the same training and
  // decoding code; whether the model learned is the release run's check.
  const bool learned = !testing::kSanitized;
  const int steps = learned ? 400 : 40;
  double first_loss = 0, loss_value = 0;
  for (int step = 0; step < steps; ++step) {
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
  if (learned) {
    CHECK(loss_value < 0.3 * first_loss);
    CHECK(exact >= batch * 3 / 4);
  }

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
    if (greedy_tokens.back() != eos && static_cast<int64_t>(greedy_tokens.size()) == len + 1)
      greedy_tokens.back() = eos;
    CHECK(one[b].tokens == greedy_tokens);
    std::vector<int64_t> wanted;
    for (int64_t i = 0; i <= len; ++i) {
      wanted.push_back(want[b * (len + 1) + i]);
      if (wanted.back() == eos) break;
    }
    beam_exact += four[b].tokens == wanted;
    if (learned) CHECK(four[b].score >= one[b].log_prob / std::pow((5.0 + one[b].tokens.size()) / 6.0, 0.6) - 1e-5);
  }
  MESSAGE("beam 4: " << beam_exact << "/" << batch << " sentences copied exactly");
  if (learned) CHECK(beam_exact >= batch * 3 / 4);

  // best_tokens: beam 1 at alpha 0 decodes greedily, the search's tokens, with eos
  // forced as the max_len-th token (3: every sentence cut short) or not.
  for (int64_t max_len : {int64_t{3}, len + 1}) {
    const BeamOptions beam1{.beam = 1, .length_penalty = 0.0, .max_len = max_len};
    auto searched = best_of(beam_search(model, src, bos, eos, beam1));
    auto tokens = best_tokens(model, src, bos, eos, beam1);
    REQUIRE(tokens.size() == static_cast<size_t>(batch));
    for (int64_t b = 0; b < batch; ++b) CHECK(tokens[b] == searched[b].tokens);
  }

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
      for (int64_t i = 0; i < 8; ++i)
        s.push_back(i < 2 + b ? 3 + static_cast<int64_t>(r[b * 8 + i] * 8) : i == 2 + b ? 2 : 0);
    CHECK(check_cached_decoding(model, ids(s, 6), 1, 2) > 16);  // past the cache's first capacity
  }
}

TEST_CASE("an ensemble: the mean of its models' log-probabilities, each model's cache kept apart") {
  TransformerConfig config = presets::tiny(11);
  Generator init_a(8), init_b(9), data(3);
  Transformer a(config, init_a), b(config, init_b);
  // 5 sentences of 2..6 tokens, padded, so that they finish at different steps.
  auto r = rand({5, 7}, {DType::f64}, data).to_vector<double>();
  std::vector<int64_t> s;
  for (int64_t k = 0; k < 5; ++k)
    for (int64_t i = 0; i < 7; ++i)
      s.push_back(i < 2 + k ? 3 + static_cast<int64_t>(r[k * 7 + i] * 8) : i == 2 + k ? 2 : 0);
  const Tensor src = ids(s, 5);
  const int64_t bos = 1, eos = 2;
  // The reference: each model re-run over every live prefix, the two log-probabilities averaged.
  auto whole_decoder = [&](Transformer& model, const BeamStep& step) {
    const int64_t n = static_cast<int64_t>(step.prefixes.size()), t = static_cast<int64_t>(step.prefixes[0].size());
    const Tensor index = from_vector(step.sentences, {n}, {DType::i64});
    const Transformer::Encoded encoded = model.encode(src);
    Transformer::Encoded rows{index_select(encoded.memory, 0, index), index_select(encoded.src_mask, 0, index)};
    std::vector<int64_t> flat;
    for (const auto& prefix : step.prefixes) flat.insert(flat.end(), prefix.begin(), prefix.end());
    return log_softmax(model.decode(rows, from_vector(flat, {n, t}, {DType::i64})).select(1, t - 1), -1);
  };
  NoGradGuard no_grad;
  a.eval(), b.eval();
  const NextTokenScorer mean_of_two = [&](const BeamStep& step) {
    return mul(add(whole_decoder(a, step), whole_decoder(b, step)), scalar_tensor(0.5, {DType::f32}));
  };
  for (const BeamOptions& o : {BeamOptions{.beam = 4, .length_penalty = 1.0, .max_len = 12, .nbest = 3},
                               BeamOptions{.beam = 1, .length_penalty = 0.0, .max_len = 12}}) {
    CAPTURE(o.beam);
    const auto ensemble = beam_search({&a, &b}, src, bos, eos, o);
    const auto reference = beam_search(mean_of_two, 5, 11, bos, eos, o);
    const auto alone = beam_search(a, src, bos, eos, o);
    REQUIRE(ensemble.size() == reference.size());
    bool differs_from_a = false;
    for (size_t k = 0; k < ensemble.size(); ++k) {
      REQUIRE(ensemble[k].size() == reference[k].size());
      for (size_t h = 0; h < ensemble[k].size(); ++h) {
        CHECK(ensemble[k][h].tokens == reference[k][h].tokens);
        CHECK(ensemble[k][h].score == doctest::Approx(reference[k][h].score).epsilon(1e-5));
      }
      differs_from_a = differs_from_a || ensemble[k][0].tokens != alone[k][0].tokens;
    }
    CHECK(differs_from_a);  // else the test could not tell the ensemble from its first model
    // best_tokens decodes an ensemble by the search, greedy or not.
    const auto tokens = best_tokens({&a, &b}, src, bos, eos, o);
    for (size_t k = 0; k < tokens.size(); ++k) CHECK(tokens[k] == ensemble[k][0].tokens);
  }
  // A model with itself: its own search, bit for bit ((x + x) * 0.5 == x).
  const BeamOptions o{.beam = 4, .length_penalty = 0.6, .max_len = 12, .nbest = 2};
  const auto twice = beam_search({&a, &a}, src, bos, eos, o), once = beam_search(a, src, bos, eos, o);
  for (size_t k = 0; k < once.size(); ++k)
    for (size_t h = 0; h < once[k].size(); ++h) {
      CHECK(twice[k][h].tokens == once[k][h].tokens);
      CHECK(twice[k][h].score == once[k][h].score);
    }
  Transformer c(presets::tiny(12), init_a);
  CHECK(error_of([&] {
          beam_search({&a, &c}, src, bos, eos, o);
        }) == "beam_search: an ensemble's models must share the target vocabulary, got 11 and 12 entries");
}

// A distribution written by hand where the greedy choice is a trap:
//   after bos: A 0.6, B 0.4;  after A: A, B, eos 1/3 each;  after B: eos 0.9, A 0.05, B 0.05
// greedy: A then eos (p = 0.2); beam 2: B eos (p = 0.36). Length penalty
// alpha = 0 compares raw probabilities.
TEST_CASE("beam search finds the likelier sentence greedy decoding misses") {
  const int64_t bos = 1, eos = 2, A = 3, B = 4, V = 5;
  auto scorer = scorer_of(V, [&](const std::vector<int64_t>& p) {
    std::vector<double> probs(V, 0.0);
    if (p.back() == bos)
      probs[A] = 0.6, probs[B] = 0.4;
    else if (p.back() == A)
      probs[A] = probs[B] = probs[eos] = 1.0 / 3;
    else
      probs[eos] = 0.9, probs[A] = probs[B] = 0.05;
    return probs;
  });
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
  // A scorer that returns the wrong shape: named, not read past its end.
  auto short_rows = [&](const BeamStep& step) { return scorer(step).narrow(1, 0, V - 1); };
  CHECK(error_of([&] { beam_search(short_rows, 1, V, bos, eos, {}); }) ==
        "beam_search: the scorer must return float32 CPU log-probabilities of shape [1, 5] (prefixes x vocabulary), "
        "got float32 [1, 4] on cpu");
}

// A NaN log-probability is never a candidate, and never hides one: the search skips
// a chunk of 16 tokens whose largest value cannot beat the kept ones, and a NaN must not
// become that largest value. After bos: A 0.2 and B 0.1 fill the 2 kept candidates (beam 1)
// from the first chunk; the third chunk holds C = 32 at 0.6, followed by NaNs in every lane.
TEST_CASE("beam search: NaNs after a candidate in its chunk do not hide it") {
  const int64_t bos = 1, eos = 2, A = 3, B = 4, C = 32, V = 64;
  auto scorer = scorer_of(V, [&](const std::vector<int64_t>& p) {
    std::vector<double> probs(V, 0.0);
    if (p.back() != bos) {
      probs[eos] = 1.0;
      return probs;
    }
    probs[A] = 0.2, probs[B] = 0.1, probs[C] = 0.6;
    for (int64_t v = C + 1; v < C + 16; ++v) probs[v] = std::numeric_limits<double>::quiet_NaN();
    return probs;
  });
  auto best = best_of(beam_search(scorer, 1, V, bos, eos, {.beam = 1, .length_penalty = 0.0, .max_len = 4}));
  CHECK(best[0].tokens == std::vector<int64_t>{C, eos});
  CHECK(best[0].log_prob == doctest::Approx(std::log(0.6)).epsilon(1e-6));
}

// The stopping bound's horizon (BeamOptions::horizon), alpha 1, beam 2:
//   after bos: eos 0.5, A 0.3, B 0.2;  after B: eos;
//   after A: A 0.999, eos 0.001 until 9 tokens are out, then eos 0.999, A 0.001.
// At step 2 the best finished is "eos" (score log 0.5 = -0.693) and the live "A A" has
// log p -1.205. Ending within 1 token it could reach at most -1.205 / (8/6) = -0.904:
// horizon 1 stops there. The exact bound (horizon 0: by max_len 30, -1.205 / (35/6)) and
// horizon 6 (-1.205 / (13/6) = -0.556) go on and find A x 9 + eos, log p -1.213, score
// -1.213 / (15/6) = -0.485.
TEST_CASE("beam search's stopping horizon: 0 is the exact bound; a short horizon can stop too early") {
  const int64_t bos = 1, eos = 2, A = 3, B = 4, V = 5;
  auto scorer = scorer_of(V, [&](const std::vector<int64_t>& p) {
    std::vector<double> probs(V, 0.0);
    if (p.back() == bos)
      probs[eos] = 0.5, probs[A] = 0.3, probs[B] = 0.2;
    else if (p.back() == B)
      probs[eos] = 1.0;
    else if (p.size() < 10)
      probs[A] = 0.999, probs[eos] = 0.001;
    else
      probs[eos] = 0.999, probs[A] = 0.001;
    return probs;
  });
  const std::vector<int64_t> long_one = {A, A, A, A, A, A, A, A, A, eos};
  for (int64_t horizon : {0, 6}) {
    CAPTURE(horizon);
    auto best = best_of(
        beam_search(scorer, 1, V, bos, eos, {.beam = 2, .length_penalty = 1.0, .max_len = 30, .horizon = horizon}));
    CHECK(best[0].tokens == long_one);
    CHECK(best[0].score == doctest::Approx((std::log(0.3) + 8 * std::log(0.999) + std::log(0.999)) / (15.0 / 6)));
  }
  auto short_sighted =
      best_of(beam_search(scorer, 1, V, bos, eos, {.beam = 2, .length_penalty = 1.0, .max_len = 30, .horizon = 1}));
  CHECK(short_sighted[0].tokens == std::vector<int64_t>{eos});
  CHECK(error_of([&] { beam_search(scorer, 1, V, bos, eos, {.horizon = -1}); }) ==
        "beam_search: horizon must be >= 0 (0: up to max_len), got -1");
}

// A sentence that would go on forever (A 0.9, eos 0.1 after every prefix; beam 2): the
// max_len-th token is eos, so the longest hypothesis is scored with its eos like the
// others. With alpha 2 it wins: A A eos, p = 0.081, score log 0.081 / (8/6)^2 = -1.41,
// against eos (-2.30) and A eos (-1.77); unfinished, A A A (p 0.729) would have won.
TEST_CASE("beam search ends every hypothesis with eos, forced at max_len") {
  const int64_t bos = 1, eos = 2, A = 3, V = 4;
  auto scorer = scorer_of(V, [](const std::vector<int64_t>&) { return std::vector<double>{0.0, 0.0, 0.1, 0.9}; });
  auto all = beam_search(scorer, 1, V, bos, eos, {.beam = 2, .length_penalty = 2.0, .max_len = 3, .nbest = 2});
  CHECK(all[0][0].tokens == std::vector<int64_t>{A, A, eos});
  CHECK(all[0][0].log_prob == doctest::Approx(std::log(0.081)).epsilon(1e-6));
  CHECK(all[0][0].score == doctest::Approx(std::log(0.081) / std::pow(8.0 / 6, 2.0)).epsilon(1e-6));
  CHECK(all[0][1].tokens == std::vector<int64_t>{A, eos});
  auto plain = beam_search(scorer, 1, V, bos, eos, {.beam = 2, .length_penalty = 0.0, .max_len = 3});
  CHECK(plain[0][0].tokens == std::vector<int64_t>{eos});  // alpha 0: the likeliest whole sentence
}
