#include "loom/models/decode.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "loom/ops.h"

namespace loom::models {

std::vector<Tensor> decoding_weights(const Transformer& model) {
  std::vector<Tensor> weights;
  auto linears_of = [&weights](const auto& layers) {
    for (const auto& layer : layers)
      for (const Tensor& p : layer->parameters())
        if (p.dim() == 2) weights.push_back(p);  // a Linear's (layer norms' are vectors)
  };
  if (packing_pays_on_many_rows()) linears_of(model.encoder);
  linears_of(model.decoder);
  weights.push_back(model.generator.weight);
  return weights;
}

std::vector<Tensor> decoding_weights(const std::vector<Transformer*>& models) {
  std::vector<Tensor> weights;
  for (const Transformer* model : models) {
    std::vector<Tensor> own = decoding_weights(*model);
    weights.insert(weights.end(), own.begin(), own.end());
  }
  return weights;
}

int64_t shortest_max_len(const std::vector<Transformer*>& models) {
  LOOM_CHECK(!models.empty(), "shortest_max_len: no model");
  int64_t max_len = models[0]->config().max_len;
  for (const Transformer* model : models) max_len = std::min(max_len, model->config().max_len);
  return max_len;
}

namespace {
void check_ensemble(const std::vector<Transformer*>& models, const char* what) {
  LOOM_CHECK(!models.empty(), "{}: no model to decode with", what);
  for (const Transformer* model : models)
    LOOM_CHECK(model->config().tgt_vocab == models[0]->config().tgt_vocab,
               "{}: an ensemble's models must share the target vocabulary, got {} and {} entries", what,
               models[0]->config().tgt_vocab, model->config().tgt_vocab);
}

// Decoding builds no graph and runs the models in eval mode (no dropout), their
// modes restored afterwards. The decoders' weights are packed for the whole
// decoding (unless a caller's guard already packed them).
class Inference {
 public:
  explicit Inference(const std::vector<Transformer*>& models) : packed_(decoding_weights(models)), eval_(models) {}
  explicit Inference(Transformer& model) : Inference(std::vector<Transformer*>{&model}) {}

 private:
  NoGradGuard no_grad_;
  PackedWeights packed_;
  nn::EvalModeGuard eval_;
};

Tensor ids_tensor(const std::vector<std::vector<int64_t>>& rows, int64_t width, int64_t pad, Device device) {
  std::vector<int64_t> flat;
  for (const auto& row : rows) {
    flat.insert(flat.end(), row.begin(), row.end());
    flat.insert(flat.end(), static_cast<size_t>(width) - row.size(), pad);
  }
  return from_vector(flat, {static_cast<int64_t>(rows.size()), width}, {DType::i64, device});
}
}  // namespace

// ---- greedy decoding ----
Tensor greedy_decode(Transformer& model, const Tensor& src, int64_t bos, int64_t eos, int64_t max_len) {
  Inference inference(model);
  Transformer::DecoderState state = model.start_decoding(model.encode(src));
  const int64_t batch = src.shape()[0];
  std::vector<std::vector<int64_t>> out(batch, std::vector<int64_t>{bos});
  std::vector<int64_t> live;  // the sentence of each row of the state
  for (int64_t b = 0; b < batch; ++b) live.push_back(b);
  int64_t width = 1;
  for (int64_t step = 0; step < max_len && !live.empty(); ++step, ++width) {
    std::vector<int64_t> last;
    for (int64_t b : live) last.push_back(out[b].back());
    const auto next = argmax(model.decode_step(state, from_vector(last, {static_cast<int64_t>(live.size())},
                                                                  {DType::i64, src.device()})),
                             -1)
                          .to(kCPU)
                          .to_vector<int64_t>();
    std::vector<int64_t> kept_rows, kept_live;
    for (size_t i = 0; i < live.size(); ++i) {
      out[live[i]].push_back(next[i]);
      if (next[i] == eos) continue;  // finished: dropped from the batch
      kept_rows.push_back(static_cast<int64_t>(i));
      kept_live.push_back(live[i]);
    }
    if (kept_live.size() < live.size()) state.select(kept_rows);
    live = std::move(kept_live);
  }
  return ids_tensor(out, width, model.config().pad_id, src.device());
}

Tensor greedy_decode_reference(Transformer& model, const Tensor& src, int64_t bos, int64_t eos, int64_t max_len) {
  Inference inference(model);
  const int64_t batch = src.shape()[0];
  Transformer::Encoded encoded = model.encode(src);
  std::vector<std::vector<int64_t>> out(batch, std::vector<int64_t>{bos});
  std::vector<bool> done(batch, false);
  for (int64_t step = 0; step < max_len; ++step) {
    Tensor logits =
        model.decode(encoded, ids_tensor(out, step + 1, 0, src.device())).select(1, step);  // [B, V]: the last position
    auto next = argmax(logits, -1).to(kCPU).to_vector<int64_t>();
    bool all_done = true;
    for (int64_t b = 0; b < batch; ++b) {
      out[b].push_back(done[b] ? model.config().pad_id : next[b]);
      done[b] = done[b] || next[b] == eos;
      all_done = all_done && done[b];
    }
    if (all_done) break;
  }
  return ids_tensor(out, static_cast<int64_t>(out[0].size()), model.config().pad_id, src.device());
}

// ---- beam search ----
double length_penalty(int64_t length, double alpha) {
  return std::pow((5.0 + static_cast<double>(length)) / 6.0, alpha);
}

namespace {
struct Beam {
  std::vector<int64_t> prefix;  // bos + generated tokens
  double log_prob = 0;
  int64_t parent = 0;  // the row of the previous step it extends (first step: its sentence)
};

struct Candidate {
  double log_prob;
  size_t beam;
  int64_t token;
};

// Best first; ties broken by (beam, token) order.
bool better(const Candidate& x, const Candidate& y) {
  if (x.log_prob != y.log_prob) return x.log_prob > y.log_prob;
  return x.beam != y.beam ? x.beam < y.beam : x.token < y.token;
}

// The k finite log-probabilities of a row that rank first (largest; ties: smaller
// token first), appended to `out` as candidates of `beam`. The best 2k extensions
// of a sentence's beams are all among their rows' best 2k, so this one pass over
// the vocabulary replaces sorting beam * vocab candidates. Once k are kept, a
// chunk of the row whose largest value cannot beat the last kept is skipped
// whole: most of an 8000-word row, after its first chunks.
void best_of_row(const float* log_probs, int64_t vocab, size_t k, size_t beam, double base,
                 std::vector<Candidate>& out) {
  const auto first = static_cast<std::ptrdiff_t>(out.size());
  constexpr int64_t kChunk = 16;
  for (int64_t begin = 0; begin < vocab; begin += kChunk) {
    const int64_t end = std::min(vocab, begin + kChunk);
    if (out.size() - static_cast<size_t>(first) == k) {
      // NaNs are never kept, so never counted: `x > largest ? x : largest` keeps
      // largest for a NaN x, as the vector max instruction this loop becomes does.
      float largest = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : largest)
      for (int64_t v = begin; v < end; ++v) largest = log_probs[v] > largest ? log_probs[v] : largest;
      if (!(base + largest > out.back().log_prob)) continue;  // base + x is monotone in x
    }
    for (int64_t v = begin; v < end; ++v) {
      if (!std::isfinite(log_probs[v])) continue;
      const double lp = base + log_probs[v];
      const bool full = out.size() - static_cast<size_t>(first) == k;
      // Scanning in token order, an equal value ranks after everything kept.
      if (full && !(lp > out.back().log_prob)) continue;
      if (full) out.pop_back();
      auto at = out.end();
      while (at != out.begin() + first && (at - 1)->log_prob < lp) --at;
      out.insert(at, Candidate{lp, beam, v});
    }
  }
}

void check_search(int64_t vocab, int64_t bos, int64_t eos, const BeamOptions& o) {
  LOOM_CHECK(o.beam >= 1 && o.max_len >= 1, "beam_search: beam and max_len must be >= 1, got {} and {}", o.beam,
             o.max_len);
  LOOM_CHECK(o.horizon >= 0, "beam_search: horizon must be >= 0 (0: up to max_len), got {}", o.horizon);
  LOOM_CHECK(o.nbest >= 1 && o.nbest <= o.beam, "beam_search: nbest must be in [1, beam {}], got {}", o.beam, o.nbest);
  LOOM_CHECK(bos >= 0 && bos < vocab && eos >= 0 && eos < vocab,
             "beam_search: bos {} and eos {} must be ids of the vocabulary of {}", bos, eos, vocab);
}

// The rows the scorer scores this step: every live beam, sentence by sentence.
BeamStep live_rows(const std::vector<std::vector<Beam>>& alive) {
  BeamStep live;
  for (size_t b = 0; b < alive.size(); ++b)
    for (const Beam& beam : alive[b]) {
      live.prefixes.push_back(beam.prefix);
      live.sentences.push_back(static_cast<int64_t>(b));
      live.parents.push_back(beam.parent);
    }
  return live;
}

// The scorer's answer, checked, as a dense float32 tensor.
Tensor checked_scores(const Tensor& scores, size_t rows, int64_t vocab) {
  const Shape expected{static_cast<int64_t>(rows), vocab};
  LOOM_CHECK(scores.defined() && scores.dtype() == DType::f32 && scores.device() == kCPU && scores.shape() == expected,
             "beam_search: the scorer must return float32 CPU log-probabilities of shape {} (prefixes x "
             "vocabulary), got {}",
             expected,
             scores.defined() ? fmt::format("{} {} on {}", dtype_name(scores.dtype()), scores.shape(), scores.device())
                              : std::string("no tensor"));
  return scores.contiguous();
}

Hypothesis finished_hypothesis(const Beam& beam, double alpha) {
  Hypothesis h{std::vector<int64_t>(beam.prefix.begin() + 1, beam.prefix.end()), beam.log_prob, 0.0};
  h.score = h.log_prob / length_penalty(static_cast<int64_t>(h.tokens.size()), alpha);
  return h;
}

// Whether a sentence is done: beam hypotheses have finished and no live beam can
// still win (its log-probability only falls, and its penalty grows at most to that
// of the longest length it may end at: BeamOptions::horizon).
bool search_done(const std::vector<Hypothesis>& finished, const std::vector<Beam>& next, const BeamOptions& o) {
  if (static_cast<int64_t>(finished.size()) < o.beam) return false;
  double best = -std::numeric_limits<double>::infinity();
  for (const Hypothesis& h : finished) best = std::max(best, h.score);
  double best_alive = -std::numeric_limits<double>::infinity();
  for (const Beam& beam : next) {
    const auto generated = static_cast<int64_t>(beam.prefix.size()) - 1;  // without bos
    const int64_t longest = o.horizon == 0 ? o.max_len : std::min(o.max_len, generated + o.horizon);
    best_alive = std::max(best_alive, beam.log_prob / length_penalty(longest, o.length_penalty));
  }
  return best >= best_alive;
}

// One step of one sentence whose beams' rows start at `row` of `log_probs`: the best
// extensions refill the beam, those ending in eos finish. Returns the next beams.
std::vector<Beam> advance(const std::vector<Beam>& beams, const float* log_probs, int64_t row, int64_t vocab,
                          int64_t eos, bool last_step, const BeamOptions& o, std::vector<Hypothesis>& finished,
                          std::vector<Candidate>& candidates) {
  const size_t keep = static_cast<size_t>(2 * o.beam);  // enough candidates to refill the beam past eos
  candidates.clear();
  for (size_t k = 0; k < beams.size(); ++k) {
    const float* row_log_probs =
        &log_probs[static_cast<size_t>(row + static_cast<int64_t>(k)) * static_cast<size_t>(vocab)];
    if (!last_step) {
      best_of_row(row_log_probs, vocab, keep, k, beams[k].log_prob, candidates);
    } else if (std::isfinite(row_log_probs[eos])) {
      // The last token allowed is eos (as fairseq does): a hypothesis at the
      // limit is scored as a whole sentence, its eos probability included, like
      // every other, instead of competing unfinished.
      candidates.push_back({beams[k].log_prob + row_log_probs[eos], k, eos});
    }
  }
  const size_t top = std::min(candidates.size(), keep);
  std::partial_sort(candidates.begin(), candidates.begin() + static_cast<std::ptrdiff_t>(top), candidates.end(),
                    better);
  std::vector<Beam> next;
  for (size_t c = 0; c < top && static_cast<int64_t>(next.size()) < o.beam; ++c) {
    const Beam& from = beams[candidates[c].beam];
    Beam extended{from.prefix, candidates[c].log_prob, row + static_cast<int64_t>(candidates[c].beam)};
    extended.prefix.push_back(candidates[c].token);
    if (!std::isfinite(extended.log_prob)) continue;
    if (candidates[c].token == eos)
      finished.push_back(finished_hypothesis(extended, o.length_penalty));
    else
      next.push_back(std::move(extended));
  }
  if (search_done(finished, next, o)) next.clear();
  return next;
}

// Each sentence's best nbest, best score first; among equal scores, the one finished first.
std::vector<std::vector<Hypothesis>> best_finished(std::vector<std::vector<Hypothesis>> finished, int64_t nbest) {
  for (size_t b = 0; b < finished.size(); ++b) {
    LOOM_CHECK(!finished[b].empty(), "beam_search: sentence {} has no finite-probability hypothesis", b);
    std::stable_sort(finished[b].begin(), finished[b].end(),
                     [](const Hypothesis& x, const Hypothesis& y) { return x.score > y.score; });
    finished[b].resize(std::min(finished[b].size(), static_cast<size_t>(nbest)));
  }
  return finished;
}
}  // namespace

std::vector<std::vector<Hypothesis>> beam_search(const NextTokenScorer& scorer, int64_t batch, int64_t vocab,
                                                 int64_t bos, int64_t eos, const BeamOptions& o) {
  check_search(vocab, bos, eos, o);
  std::vector<std::vector<Beam>> alive(batch);
  for (int64_t b = 0; b < batch; ++b) alive[b].push_back(Beam{{bos}, 0.0, b});
  std::vector<std::vector<Hypothesis>> finished(batch);
  std::vector<Candidate> candidates;
  for (int64_t step = 0; step < o.max_len; ++step) {
    const BeamStep live = live_rows(alive);
    if (live.prefixes.empty()) break;
    const Tensor scores = checked_scores(scorer(live), live.prefixes.size(), vocab);
    int64_t row = 0;  // this step's row of the sentence's first beam
    for (int64_t b = 0; b < batch; ++b) {
      std::vector<Beam> next =
          advance(alive[b], scores.data<float>(), row, vocab, eos, step + 1 == o.max_len, o, finished[b], candidates);
      row += static_cast<int64_t>(alive[b].size());
      alive[b] = std::move(next);
    }
  }
  return best_finished(std::move(finished), o.nbest);
}

std::vector<std::vector<Hypothesis>> beam_search(const std::vector<Transformer*>& models, const Tensor& src,
                                                 int64_t bos, int64_t eos, const BeamOptions& options) {
  check_ensemble(models, "beam_search");
  Inference inference(models);
  std::vector<Transformer::DecoderState> states;
  for (Transformer* model : models) states.push_back(model->start_decoding(model->encode(src)));
  auto scorer = [&](const BeamStep& step) {
    std::vector<int64_t> last;
    for (const auto& prefix : step.prefixes) last.push_back(prefix.back());
    const Tensor tokens = from_vector(last, {static_cast<int64_t>(last.size())}, {DType::i64, src.device()});
    Tensor sum;
    for (size_t i = 0; i < models.size(); ++i) {
      states[i].select(step.parents);
      Tensor log_probs = log_softmax(models[i]->decode_step(states[i], tokens), -1);
      sum = i == 0 ? log_probs : add(sum, log_probs);
    }
    // An ensemble scores by the mean of its models' log-probabilities (Marian's,
    // with equal weights): on one model's scale, so alpha means the same.
    if (models.size() > 1)
      sum = mul(sum, scalar_tensor(1.0 / static_cast<double>(models.size()), {DType::f32, sum.device()}));
    return sum.to(kCPU);
  };
  return beam_search(scorer, src.shape()[0], models[0]->config().tgt_vocab, bos, eos, options);
}

std::vector<std::vector<Hypothesis>> beam_search(Transformer& model, const Tensor& src, int64_t bos, int64_t eos,
                                                 const BeamOptions& options) {
  return beam_search(std::vector<Transformer*>{&model}, src, bos, eos, options);
}

std::vector<std::vector<int64_t>> best_tokens(const std::vector<Transformer*>& models, const Tensor& src, int64_t bos,
                                              int64_t eos, const BeamOptions& options) {
  check_ensemble(models, "best_tokens");
  std::vector<std::vector<int64_t>> tokens;
  if (models.size() > 1 || options.beam != 1 || options.length_penalty != 0.0 || options.max_len < 1) {
    for (auto& best : beam_search(models, src, bos, eos, options)) tokens.push_back(std::move(best[0].tokens));
    return tokens;
  }
  // Beam 1 takes the top token at every step and ends a hypothesis at eos, or with
  // eos as its max_len-th token: greedy's first max_len - 1 tokens, then eos.
  const Tensor ids = greedy_decode(*models[0], src, bos, eos, options.max_len - 1).to(kCPU);
  const int64_t width = ids.shape()[1];
  const std::vector<int64_t> flat = ids.to_vector<int64_t>();
  for (int64_t b = 0; b < ids.shape()[0]; ++b) {
    std::vector<int64_t>& row = tokens.emplace_back();
    for (int64_t i = 1; i < width && (row.empty() || row.back() != eos); ++i) row.push_back(flat[b * width + i]);
    if (row.empty() || row.back() != eos) row.push_back(eos);
  }
  return tokens;
}

std::vector<std::vector<int64_t>> best_tokens(Transformer& model, const Tensor& src, int64_t bos, int64_t eos,
                                              const BeamOptions& options) {
  return best_tokens(std::vector<Transformer*>{&model}, src, bos, eos, options);
}

std::vector<std::vector<Hypothesis>> beam_search_reference(Transformer& model, const Tensor& src, int64_t bos,
                                                           int64_t eos, const BeamOptions& options) {
  Inference inference(model);
  Transformer::Encoded encoded = model.encode(src);
  auto scorer = [&](const BeamStep& step) {
    // Prefixes all have the same length at a given step.
    const int64_t n = static_cast<int64_t>(step.prefixes.size()), t = static_cast<int64_t>(step.prefixes[0].size());
    Tensor index = from_vector(step.sentences, {n}, {DType::i64, src.device()});
    Transformer::Encoded rows{index_select(encoded.memory, 0, index), index_select(encoded.src_mask, 0, index)};
    Tensor logits = model.decode(rows, ids_tensor(step.prefixes, t, 0, src.device())).select(1, t - 1);
    return log_softmax(logits, -1).to(kCPU);
  };
  return beam_search(scorer, src.shape()[0], model.config().tgt_vocab, bos, eos, options);
}

}  // namespace loom::models
