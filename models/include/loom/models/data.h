#pragma once
// The translation pipeline's data side: reading a parallel corpus (plain or
// gzip-compressed text, one sentence per line), a SentencePiece subword
// vocabulary, and batches of similar-length sentence pairs under a token budget
// (the paper: ~25000 source and target tokens per batch).
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "loom/random.h"
#include "loom/tensor.h"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace loom::models {

// Lines of a text file, gzip-compressed or not (zlib reads both); without
// their line endings. Errors name the file.
std::vector<std::string> read_lines(const std::string& path);

// True for a line of nothing but whitespace (spaces, tabs, carriage returns).
bool is_blank(const std::string& line);

struct ParallelCorpus {
  std::vector<std::string> src, tgt;
};
// Line i of `src_path` translates to line i of `tgt_path`; the counts must agree.
ParallelCorpus read_parallel(const std::string& src_path, const std::string& tgt_path);
// <dir>/<split>.<lang>, or the same with .gz; an error names `command` and both paths.
std::string corpus_file(const std::string& dir, const std::string& split, const std::string& lang,
                        std::string_view command);

// A SentencePiece model with loom's special ids: pad 0, unk 1, bos 2, eos 3.
class Vocabulary {
 public:
  static constexpr int64_t kPad = 0, kUnk = 1, kBos = 2, kEos = 3;

  // Trains a unigram model of `size` pieces on `sentences` and writes
  // `<prefix>.model` and `<prefix>.vocab`. Deterministic for the same input.
  static void train(const std::vector<std::string>& sentences, const std::string& prefix, int64_t size);

  explicit Vocabulary(const std::string& model_path);
  ~Vocabulary();
  Vocabulary(const Vocabulary&) = delete;
  Vocabulary& operator=(const Vocabulary&) = delete;

  std::vector<int64_t> encode(const std::string& text) const;  // pieces, no bos/eos
  std::string decode(const std::vector<int64_t>& ids) const;   // stops at eos, skips pad/bos
  std::string piece(int64_t id) const;                         // the subword itself ("▁Hund"), for labels
  int64_t size() const;
  const std::string& path() const { return path_; }

 private:
  std::unique_ptr<sentencepiece::SentencePieceProcessor> processor_;
  std::string path_;
};

struct Batch {
  Tensor src;                              // [B, S] ids + eos, padded with kPad
  Tensor tgt_in;                           // [B, T] bos + ids
  Tensor tgt_out;                          // [B, T] ids + eos
  int64_t src_tokens = 0, tgt_tokens = 0;  // real (not padding) tokens
};

struct EncodedPair {
  std::vector<int64_t> src, tgt;  // pieces, without bos/eos
};

// Whether both sides fit in max_len positions (pieces + eos or bos): the pairs make_batches keeps.
bool fits(const EncodedPair& pair, int64_t max_len);

// How make_batches forms its groups: `fixed`, the same batches at every call (pairs
// of equal lengths in corpus order), or `drawn` from `gen` as well (pairs of equal
// lengths in a random order first, so the batches' companions change, as Marian's
// shuffled corpus does).
enum class Grouping { fixed, drawn };

// Groups pairs of similar length into batches whose padded size (sentences x
// longest side + 1) stays within `max_tokens`, in an order shuffled by `gen`
// (the same seed gives the same batches). Pairs longer than max_len on either
// side are dropped.
std::vector<Batch> make_batches(const std::vector<EncodedPair>& pairs, int64_t max_tokens, int64_t max_len,
                                Generator& gen, Grouping grouping = Grouping::fixed);

// How many batches make_batches forms with Grouping::fixed (drawn groupings differ
// by a few).
int64_t count_batches(const std::vector<EncodedPair>& pairs, int64_t max_tokens, int64_t max_len);

}  // namespace loom::models
