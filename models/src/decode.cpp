#include "loom/models/decode.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "loom/ops.h"

namespace loom::models {

// ---- greedy decoding ----
Tensor greedy_decode(Transformer& model, const Tensor& src, int64_t bos, int64_t eos, int64_t max_len) {
  NoGradGuard no_grad;
  const bool was_training = model.is_training();
  model.eval();
  const int64_t batch = src.shape()[0];
  Transformer::Encoded encoded = model.encode(src);
  std::vector<std::vector<int64_t>> out(batch, std::vector<int64_t>{bos});
  std::vector<bool> done(batch, false);
  for (int64_t step = 0; step < max_len; ++step) {
    std::vector<int64_t> flat;
    for (const auto& row : out) flat.insert(flat.end(), row.begin(), row.end());
    Tensor tgt = from_vector(flat, {batch, step + 1}, {DType::i64, src.device()});
    Tensor logits = model.decode(encoded, tgt).select(1, step);  // [B, V]: the last position
    auto next = argmax(logits, -1).to(kCPU).to_vector<int64_t>();
    bool all_done = true;
    for (int64_t b = 0; b < batch; ++b) {
      out[b].push_back(done[b] ? model.config().pad_id : next[b]);
      done[b] = done[b] || next[b] == eos;
      all_done = all_done && done[b];
    }
    if (all_done) break;
  }
  model.train(was_training);
  std::vector<int64_t> flat;
  for (const auto& row : out) flat.insert(flat.end(), row.begin(), row.end());
  return from_vector(flat, {batch, static_cast<int64_t>(out[0].size())}, {DType::i64, src.device()});
}

// ---- beam search ----
namespace {
double length_penalty(int64_t length, double alpha) {
  return std::pow((5.0 + static_cast<double>(length)) / 6.0, alpha);
}

struct Beam {
  std::vector<int64_t> prefix;  // bos + generated tokens
  double log_prob = 0;
};
}  // namespace

std::vector<Hypothesis> beam_search(const NextTokenScorer& scorer, int64_t batch, int64_t vocab, int64_t bos,
                                    int64_t eos, const BeamOptions& o) {
  LOOM_CHECK(o.beam >= 1 && o.max_len >= 1, "beam_search: beam and max_len must be >= 1, got {} and {}", o.beam,
             o.max_len);
  LOOM_CHECK(bos >= 0 && bos < vocab && eos >= 0 && eos < vocab,
             "beam_search: bos {} and eos {} must be ids of the vocabulary of {}", bos, eos, vocab);
  std::vector<std::vector<Beam>> alive(batch, std::vector<Beam>{Beam{{bos}, 0.0}});
  std::vector<std::vector<Hypothesis>> finished(batch);
  auto finish = [&](int64_t b, const Beam& beam) {
    Hypothesis h{std::vector<int64_t>(beam.prefix.begin() + 1, beam.prefix.end()), beam.log_prob, 0.0};
    h.score = h.log_prob / length_penalty(static_cast<int64_t>(h.tokens.size()), o.length_penalty);
    finished[b].push_back(std::move(h));
  };
  for (int64_t step = 0; step < o.max_len; ++step) {
    std::vector<std::vector<int64_t>> prefixes;
    std::vector<int64_t> rows;
    for (int64_t b = 0; b < batch; ++b)
      for (const Beam& beam : alive[b]) {
        prefixes.push_back(beam.prefix);
        rows.push_back(b);
      }
    if (prefixes.empty()) break;
    const std::vector<float> log_probs = scorer(prefixes, rows);
    LOOM_CHECK(log_probs.size() == prefixes.size() * static_cast<size_t>(vocab),
               "beam_search: the scorer returned {} values for {} prefixes of a vocabulary of {}", log_probs.size(),
               prefixes.size(), vocab);
    size_t row = 0;
    for (int64_t b = 0; b < batch; ++b) {
      // Every extension of every live beam, best first; ties broken by (beam, token) order.
      struct Candidate {
        double log_prob;
        size_t beam;
        int64_t token;
      };
      std::vector<Candidate> candidates;
      for (size_t k = 0; k < alive[b].size(); ++k, ++row)
        for (int64_t v = 0; v < vocab; ++v)
          candidates.push_back({alive[b][k].log_prob + log_probs[row * vocab + v], k, v});
      const size_t keep = std::min(candidates.size(), static_cast<size_t>(2 * o.beam));
      std::partial_sort(candidates.begin(), candidates.begin() + keep, candidates.end(),
                        [](const Candidate& x, const Candidate& y) {
                          if (x.log_prob != y.log_prob) return x.log_prob > y.log_prob;
                          return x.beam != y.beam ? x.beam < y.beam : x.token < y.token;
                        });
      std::vector<Beam> next;
      for (size_t c = 0; c < keep && static_cast<int64_t>(next.size()) < o.beam; ++c) {
        Beam extended{alive[b][candidates[c].beam].prefix, candidates[c].log_prob};
        extended.prefix.push_back(candidates[c].token);
        if (!std::isfinite(extended.log_prob)) continue;
        if (candidates[c].token == eos) finish(b, extended);
        else next.push_back(std::move(extended));
      }
      // Done when beam hypotheses have finished and no live beam can still win:
      // its log-probability only falls, and its penalty grows at most to max_len's.
      if (static_cast<int64_t>(finished[b].size()) >= o.beam) {
        double best = -std::numeric_limits<double>::infinity();
        for (const Hypothesis& h : finished[b]) best = std::max(best, h.score);
        double best_alive = -std::numeric_limits<double>::infinity();
        for (const Beam& beam : next)
          best_alive = std::max(best_alive, beam.log_prob / length_penalty(o.max_len, o.length_penalty));
        if (best >= best_alive) next.clear();
      }
      alive[b] = std::move(next);
    }
  }
  std::vector<Hypothesis> best(batch);
  for (int64_t b = 0; b < batch; ++b) {
    for (const Beam& beam : alive[b]) finish(b, beam);  // cut at max_len
    LOOM_CHECK(!finished[b].empty(), "beam_search: sentence {} has no finite-probability hypothesis", b);
    best[b] = *std::max_element(finished[b].begin(), finished[b].end(),
                                [](const Hypothesis& x, const Hypothesis& y) { return x.score < y.score; });
  }
  return best;
}

std::vector<Hypothesis> beam_search(Transformer& model, const Tensor& src, int64_t bos, int64_t eos,
                                    const BeamOptions& options) {
  NoGradGuard no_grad;
  const bool was_training = model.is_training();
  model.eval();
  Transformer::Encoded encoded = model.encode(src);
  const int64_t vocab = model.config().tgt_vocab;
  auto scorer = [&](const std::vector<std::vector<int64_t>>& prefixes, const std::vector<int64_t>& rows) {
    // Prefixes all have the same length at a given step.
    const int64_t n = static_cast<int64_t>(prefixes.size()), t = static_cast<int64_t>(prefixes[0].size());
    std::vector<int64_t> flat;
    for (const auto& p : prefixes) flat.insert(flat.end(), p.begin(), p.end());
    Tensor index = from_vector(rows, {n}, {DType::i64, src.device()});
    Transformer::Encoded rows_encoded{index_select(encoded.memory, 0, index), index_select(encoded.src_mask, 0, index)};
    Tensor logits = model.decode(rows_encoded, from_vector(flat, {n, t}, {DType::i64, src.device()})).select(1, t - 1);
    return log_softmax(logits, -1).contiguous().to(kCPU).to_vector<float>();
  };
  std::vector<Hypothesis> result = beam_search(scorer, src.shape()[0], vocab, bos, eos, options);
  model.train(was_training);
  return result;
}

}  // namespace loom::models
