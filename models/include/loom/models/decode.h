#pragma once
// Decoding: greedy, and beam search with the GNMT length penalty (the paper:
// beam 4, alpha 0.6, at most input length + 50 tokens). Beam search runs on any
// next-token scorer, so it can be tested on distributions written by hand.
//
// The Transformer's decoders come in pairs, like the fast/reference kernels:
// greedy_decode and beam_search feed one token per step to a cached decoder state
// (Transformer::decode_step: self-attention keys/values cached per layer, the
// source's projected once, only the newest position projected to the vocabulary,
// finished sentences dropped from the batch); the *_reference versions re-run the
// whole decoder over every prefix (Transformer::decode), readable and slow, and
// are what the fast ones are tested against. Both run without building a graph.
#include <functional>
#include <vector>

#include "loom/models/data.h"
#include "loom/models/transformer.h"
#include "loom/ops/packed_weights.h"

namespace loom::models {

// The weights that decoding multiplies a few rows by at every step: the decoder
// layers' Linears and the generator (tied to the target embedding); and the
// encoder layers' Linears where packing pays on many rows too (an encoder multiplies
// a batch's source tokens at once; loom/ops/packed_weights.h). Each decoding
// call below packs them for its products (loom/ops/packed_weights.h); a caller
// that decodes batch after batch (translate, validation) holds one guard over
// the loop, `PackedWeights packed(decoding_weights(model));`, and they are packed
// once. The translations are the same either way.
std::vector<Tensor> decoding_weights(const Transformer& model);
std::vector<Tensor> decoding_weights(const std::vector<Transformer*>& models);  // an ensemble's, all of them

// Greedy decoding: starting from `bos`, appends the most likely next token
// until every sentence has produced `eos` or max_len tokens. Returns [B, <= max_len + 1]
// ids including bos, padded with pad_id after eos (eval mode, no graph).
Tensor greedy_decode(Transformer& model, const Tensor& src, int64_t bos, int64_t eos, int64_t max_len);
Tensor greedy_decode_reference(Transformer& model, const Tensor& src, int64_t bos, int64_t eos, int64_t max_len);

// Runs decode(b) for every batch b < count of a decoding with `model`, the last
// first (callers sort their batches shortest first, so the longest start first),
// with the decoding weights packed once for all of them and the model in eval mode
// (the caller's mode restored after; no worker changes it). On the CPU, `threads`
// workers each decode whole batches, taking the next when done, and run
// single-threaded kernels (inside this parallel region): no thread waits while
// another runs a step's serial work (the search, the ops' glue), and each batch
// gives the bits it gives on one thread, since no kernel's result depends on the
// thread count or on the other batches. On a GPU (the device of the model's
// parameters), one batch at a time. decode must write only its own batch's
// results. The first error (or interrupt) of any worker is rethrown once all have
// stopped. Returns how many workers decoded at once (1 on a GPU).
int decode_batches(Transformer& model, size_t count, int threads, const std::function<void(size_t)>& decode);
// The same for an ensemble: every model's weights packed, every model in eval mode.
int decode_batches(const std::vector<Transformer*>& models, size_t count, int threads,
                   const std::function<void(size_t)>& decode);

// Corpus BLEU (sacreBLEU's default) of greedy translations of `sources` (pieces,
// without eos) against `references`, one each: a training run's validation score.
// Sentences are decoded in batches of similar length, at most source length +
// `extra_len` tokens each, on the device of the model's parameters (on the CPU,
// whole batches per thread: decode_batches).
double greedy_bleu(Transformer& model, const Vocabulary& vocab, const std::vector<std::vector<int64_t>>& sources,
                   const std::vector<std::string>& references, int64_t extra_len = 50);

struct BeamOptions {
  int64_t beam = 4;
  double length_penalty = 0.6;  // alpha: score = log p / ((5 + length) / 6)^alpha (Wu et al. 2016)
  int64_t max_len = 100;        // generated tokens, eos included: the max_len-th token is eos
  int64_t nbest = 1;            // finished hypotheses returned per sentence, at most beam
  // When a sentence stops: once `beam` hypotheses have finished and no live one can
  // still score above the best of them. A live one's log p only falls, so its score
  // is at most log p / penalty(the longest length it may end at). With horizon 0 that
  // length is max_len: an exact bound, but with alpha near 1 or above it keeps
  // settled sentences decoding for many steps (penalty(max_len) is large). With
  // horizon H it is its length now + H: a heuristic. Default 6: on Multi30k val
  // (en -> de, 3 models, alpha 0.6 and 1.4; docs/benchmarks.md) every translation is
  // the exact bound's and the decoder runs 42% fewer rows.
  int64_t horizon = 6;
};

struct Hypothesis {
  std::vector<int64_t> tokens;  // generated tokens, without bos; ends with eos (forced at max_len)
  double log_prob = 0;          // sum of the tokens' log-probabilities
  double score = 0;             // log_prob / length penalty: what the search maximizes
};

// The search's length penalty ((5 + length) / 6)^alpha, length counting eos.
double length_penalty(int64_t length, double alpha);

// One step of the search, for the scorer: the live prefixes (each starting with
// bos, all of one length), the batch sentence each continues, and the row of the
// previous step's prefixes that each extends by its last token (at the first step:
// its sentence). A scorer that keeps a cache reorders it by `parents` and feeds
// only the last tokens.
struct BeamStep {
  std::vector<std::vector<int64_t>> prefixes;
  std::vector<int64_t> sentences, parents;
};

// Next-token log-probabilities of every prefix of a step: a float32 CPU tensor of N
// rows of V values (read where it is: no copy of N x V floats per step).
using NextTokenScorer = std::function<Tensor(const BeamStep& step)>;

// Per sentence of a batch of `batch` over a vocabulary of `vocab`: the best
// options.nbest finished hypotheses, best score first.
std::vector<std::vector<Hypothesis>> beam_search(const NextTokenScorer& scorer, int64_t batch, int64_t vocab,
                                                 int64_t bos, int64_t eos, const BeamOptions& options = {});

// Beam search with the Transformer: the source encoded once, then the cached decoder
// (beam_search) or the whole decoder re-run over every live prefix (the reference).
std::vector<std::vector<Hypothesis>> beam_search(Transformer& model, const Tensor& src, int64_t bos, int64_t eos,
                                                 const BeamOptions& options = {});
// An ensemble (checkpoints of one run, or models trained apart, with one target
// vocabulary): each model encodes the source and keeps its own decoder state, and
// a prefix's next-token log-probabilities are the mean of the models' (as Marian
// scores an ensemble with equal weights). One model: the search above, bit for bit.
std::vector<std::vector<Hypothesis>> beam_search(const std::vector<Transformer*>& models, const Tensor& src,
                                                 int64_t bos, int64_t eos, const BeamOptions& options = {});
std::vector<std::vector<Hypothesis>> beam_search_reference(Transformer& model, const Tensor& src, int64_t bos,
                                                           int64_t eos, const BeamOptions& options = {});

// The best hypothesis' tokens per sentence (beam_search's first, eos included), for
// a caller that reads no scores: beam 1 at alpha 0 is then greedy decoding, argmax
// of the logits (no log-softmax over the vocabulary, no search), the same tokens.
std::vector<std::vector<int64_t>> best_tokens(Transformer& model, const Tensor& src, int64_t bos, int64_t eos,
                                              const BeamOptions& options = {});
// An ensemble's best tokens (always by the search: greedy decoding is one model's).
std::vector<std::vector<int64_t>> best_tokens(const std::vector<Transformer*>& models, const Tensor& src, int64_t bos,
                                              int64_t eos, const BeamOptions& options = {});

// The longest sequence (source + eos, or target prefix) every model's positional table holds.
int64_t shortest_max_len(const std::vector<Transformer*>& models);

}  // namespace loom::models
