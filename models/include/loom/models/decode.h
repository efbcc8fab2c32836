#pragma once
// Decoding: greedy, and beam search with the GNMT length penalty (the paper:
// beam 4, alpha 0.6, at most input length + 50 tokens). Beam search runs on any
// next-token scorer, so it can be tested on distributions written by hand; the
// Transformer's scorer re-runs the decoder over each prefix (no key/value cache yet).
#include <functional>
#include <vector>

#include "loom/models/transformer.h"

namespace loom::models {

// Greedy decoding: starting from `bos`, appends the most likely next token
// until every sentence has produced `eos` or max_len tokens. Returns [B, <= max_len + 1]
// ids including bos, padded with pad_id after eos (eval mode, no graph).
Tensor greedy_decode(Transformer& model, const Tensor& src, int64_t bos, int64_t eos, int64_t max_len);

struct BeamOptions {
  int64_t beam = 4;
  double length_penalty = 0.6;  // alpha: score = log p / ((5 + length) / 6)^alpha (Wu et al. 2016)
  int64_t max_len = 100;        // generated tokens, eos included
};

struct Hypothesis {
  std::vector<int64_t> tokens;  // generated tokens, without bos; ends with eos unless cut at max_len
  double log_prob = 0;          // sum of the tokens' log-probabilities
  double score = 0;             // log_prob / length penalty: what the search maximizes
};

// Next-token log-probabilities for a set of prefixes: `prefixes` [N][t] (each
// starting with bos; `rows` says which sentence of the batch each prefix belongs to)
// -> N rows of V log-probabilities, flattened.
using NextTokenScorer =
    std::function<std::vector<float>(const std::vector<std::vector<int64_t>>& prefixes, const std::vector<int64_t>& rows)>;

// The best hypothesis per sentence of a batch of `batch` sentences over a vocabulary of `vocab`.
std::vector<Hypothesis> beam_search(const NextTokenScorer& scorer, int64_t batch, int64_t vocab, int64_t bos,
                                    int64_t eos, const BeamOptions& options = {});

// Beam search with the Transformer: the source encoded once, the decoder run on every live prefix.
std::vector<Hypothesis> beam_search(Transformer& model, const Tensor& src, int64_t bos, int64_t eos,
                                    const BeamOptions& options = {});

}  // namespace loom::models
