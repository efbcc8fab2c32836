#pragma once
// The translation pipeline's data side: reading a parallel corpus (plain or
// gzip-compressed text, one sentence per line), a SentencePiece subword
// vocabulary, and batches of similar-length sentence pairs under a token budget
// (the paper: ~25000 source and target tokens per batch).
#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "loom/byte_hash.h"
#include "loom/random.h"
#include "loom/tensor.h"
#include "loom/utf8.h"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace loom::models {

// An error naming `source` and the line unless `line` (1-based `number`) is UTF-8: every
// command reads text by this one rule (SentencePiece and JSON would take bad bytes apart
// or refuse them later, far from the file).
void check_utf8(std::string_view line, const std::string& source, int64_t number);

// A text file line by line, gzip-compressed or not (zlib reads both), without
// the line endings and without holding more than a buffer of it; each line must be
// UTF-8. Errors name the file (and the line).
class LineReader {
 public:
  explicit LineReader(std::string path);
  ~LineReader();
  LineReader(const LineReader&) = delete;
  LineReader& operator=(const LineReader&) = delete;
  bool next(std::string& line);  // false at the end of the file
  int64_t lines_read() const { return lines_; }
  const std::string& path() const { return path_; }

 private:
  bool refill();
  std::string path_;
  void* file_;  // gzFile
  std::vector<char> buffer_;
  size_t at_ = 0, end_ = 0;
  int64_t lines_ = 0;
};

// Every line of a text file (a small one: a validation or test split).
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

// A small split held as text (validation, test): <dir>/<name>.<src> and .<tgt>
// (or .gz), refused when empty or all blank, naming `command`, the split and the file.
struct Split {
  std::string name, src_path, tgt_path;
  ParallelCorpus corpus;
};
Split read_split(const std::string& dir, const std::string& src, const std::string& tgt, const std::string& name,
                 std::string_view command = "train");

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

// A pair's lengths in pieces (without bos/eos): all that batching reads of it.
struct PairLength {
  uint16_t src = 0, tgt = 0;
};
constexpr int64_t kMaxPieces = 65535;  // a side's limit (a PairLength's)

// Training pairs as batching reads them: every pair's lengths at once, a pair's
// ids only when its batch is made. A corpus store (loom/models/corpus_store.h)
// maps them from disk; PairsInMemory holds them.
class PairSource {
 public:
  virtual ~PairSource() = default;
  virtual std::span<const PairLength> lengths() const = 0;
  // Pair i's pieces: lengths()[i].src ids into `src`, lengths()[i].tgt into `tgt`.
  virtual void read_pair(int64_t i, int64_t* src, int64_t* tgt) const = 0;
  // fingerprint() of all the pairs, known without reading them again.
  virtual uint64_t fingerprint() const = 0;
  int64_t size() const { return static_cast<int64_t>(lengths().size()); }
};

class PairsInMemory final : public PairSource {
 public:
  explicit PairsInMemory(std::vector<EncodedPair> pairs);  // a side over kMaxPieces is an error
  std::span<const PairLength> lengths() const override { return lengths_; }
  void read_pair(int64_t i, int64_t* src, int64_t* tgt) const override;
  uint64_t fingerprint() const override { return fingerprint_; }

 private:
  std::vector<EncodedPair> pairs_;
  std::vector<PairLength> lengths_;
  uint64_t fingerprint_ = 0;
};

// A digest of pairs (FNV-1a over each side's length and ids, as 8 bytes each): a
// resumed run checks it, and a corpus store keeps its pairs' in its manifest.
class PairHash {
 public:
  void add(std::span<const int64_t> src, std::span<const int64_t> tgt);
  uint64_t value() const { return h_.value(); }

 private:
  ByteHash h_;
};
uint64_t fingerprint(const std::vector<EncodedPair>& pairs);
// The digest of the pairs `which` of `pairs` (reads each of them).
uint64_t fingerprint(const PairSource& pairs, std::span<const uint32_t> which);

class Vocabulary;
// Every pair of `corpus` as pieces (in parallel over the pairs).
std::vector<EncodedPair> encode(const Vocabulary& vocab, const ParallelCorpus& corpus);
// The pairs of a split that fit max_len; says how many were dropped (on stdout), and refuses a split left empty.
std::vector<EncodedPair> keep_fitting(std::vector<EncodedPair> pairs, const Split& split, int64_t max_len);

// Whether both sides fit in max_len positions (pieces + eos or bos): the pairs make_batches keeps.
bool fits(const EncodedPair& pair, int64_t max_len);
inline bool fits(PairLength pair, int64_t max_len) { return std::max<int64_t>(pair.src, pair.tgt) + 1 <= max_len; }
// The pairs that fit, in corpus order.
std::vector<uint32_t> fitting_pairs(std::span<const PairLength> lengths, int64_t max_len);
int64_t count_fitting(std::span<const PairLength> lengths, int64_t max_len);

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

// make_batches in two halves, for corpora too large to hold as batches: which
// pairs each batch of an epoch takes (of `candidates`, pair indices in corpus
// order; the same draws from `gen` as make_batches), and one batch made when it is
// used. A plan is three flat arrays (a few bytes per pair), not a vector per batch.
struct BatchPlan {
  std::vector<uint32_t> pairs;  // by length, group after group
  std::vector<size_t> starts;   // group g is pairs[starts[g], starts[g + 1])
  std::vector<uint32_t> order;  // the batches' order: batch b is group order[b]
  size_t size() const { return order.size(); }
  std::span<const uint32_t> operator[](size_t b) const {
    const uint32_t g = order[b];
    return {pairs.data() + starts[g], starts[g + 1] - starts[g]};
  }
};
BatchPlan plan_batches(std::span<const PairLength> lengths, std::vector<uint32_t> candidates, int64_t max_tokens,
                       int64_t max_len, Generator& gen, Grouping grouping = Grouping::fixed);
int64_t count_batches(std::span<const PairLength> lengths, std::vector<uint32_t> candidates, int64_t max_tokens,
                      int64_t max_len);
Batch make_batch(const PairSource& pairs, std::span<const uint32_t> group);
// b with its sentence count and both lengths rounded up to multiples of `multiple`,
// the new places padding (empty sentences: no tokens, so the loss is unchanged):
// batches whose shapes repeat (--pad-to, for CUDA graphs). multiple 1: b itself.
Batch padded_to(const Batch& b, int64_t multiple);
// A batch's token counts alone (no tensors): a micro-batch another rank runs.
Batch count_tokens(std::span<const PairLength> lengths, std::span<const uint32_t> group);

}  // namespace loom::models
