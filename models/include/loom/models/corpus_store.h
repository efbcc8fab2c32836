#pragma once
// A training corpus prepared once and mapped at every start (as fairseq's
// binarized datasets are): `loom data prepare` reads a corpus folder, trains the
// joint SentencePiece vocabulary on a sample, encodes every pair and writes a
// store; `loom train --data STORE` maps it read-only, so a run of millions of
// pairs starts in seconds, holds the same memory at any corpus size, and every
// rank of a data-parallel run shares one copy (the page cache).
//
// A store is a folder:
//   manifest.json    format, version, languages, counts, the pairs' fingerprint,
//                    the lengths' digest, the arguments, what cleaning dropped
//   train.lengths    per pair: source and target length in pieces (2 x uint16)
//   train.tokens     per pair: its source ids, then its target ids (uint16, or
//                    int32 for a vocabulary over 65536 pieces), no bos/eos
//   spm.model/.vocab the vocabulary
//   val.<src>/.<tgt> the validation split's text as it was (small), when there was one
// written into <store>.tmp.<pid> and renamed whole: a store exists complete or not at all.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "loom/mapped_file.h"
#include "loom/models/data.h"

namespace loom::models {

struct PrepareOptions {
  std::string data, src = "de", tgt = "en";  // <data>/train.<src>[.gz] and .<tgt>
  std::string out;                           // the store's folder (must not exist)
  int64_t vocab = 8000;                      // pieces of a vocabulary trained here
  // SentencePiece trains on at most this many sentences (both sides of a sample of
  // pairs, Marian's --sentencepiece-max-lines); a smaller corpus trains on all of it.
  int64_t vocab_sample = 2'000'000;
  std::string vocabulary;  // an existing spm.model to encode with instead (vocab and vocab_sample unused)
  // Cleaning, as the WMT recipes do (off: every pair is kept).
  int64_t max_pieces = 0;  // drop a pair with a side longer than this (0: the store's limit, kMaxPieces, is an error)
  double max_ratio = 0;    // drop a pair whose longer side has more than this times the shorter's pieces
  bool drop_empty = false, drop_duplicates = false;
  // Called after each chunk of pairs is encoded: pairs done of the total.
  std::function<void(int64_t done, int64_t total)> progress;
  std::function<void(const std::string&)> message;  // what prepare found or did (vocabulary trained, pairs dropped)
};

struct StoreManifest {
  static constexpr const char* kFormat = "loom-corpus-store";
  static constexpr int kVersion = 1;
  std::string src, tgt;
  int64_t pairs = 0, tokens = 0, id_bytes = 2, pieces = 0;
  uint64_t fingerprint = 0, lengths_digest = 0;
  int64_t sampled_sentences = 0;  // what SentencePiece trained on (0: given)
  int64_t read = 0, dropped_long = 0, dropped_ratio = 0, dropped_empty = 0, dropped_duplicates = 0;
  std::string arguments;  // PrepareOptions as JSON (data, languages, sizes, cleaning)
  std::string to_json() const;
  static StoreManifest from_json(const std::string& text, const std::string& path);
};

// Prepares a store (see above); returns its manifest. Errors name the file and what
// to do; on any error nothing is left at `options.out`.
StoreManifest prepare_store(const PrepareOptions& options);

// Whether `dir` holds a store's manifest (a corpus folder does not).
bool is_store(const std::string& dir);

// The manifest of the store at `dir`, alone (its files are not opened): for checks
// that need only its languages, sizes or arguments.
StoreManifest read_manifest(const std::string& dir);

// Whether the store at `dir` was prepared from `options`' corpus (the same files,
// sizes and times) with the same arguments: a run folder's store is reused then.
bool store_matches(const std::string& dir, const PrepareOptions& options);

class CorpusStore;

// The store a run in `out` trains from (called by one process: rank 0): `how.data`
// itself when it is a store; else <out>/corpus, prepared from the corpus folder
// `how.data` (a new run reuses one prepared with the same arguments; a resumed run
// uses the one it has, or, for a run folder from before stores, prepares one with
// the run's <out>/spm.model), opened. A new run's <out>/spm.model is the store's
// vocabulary, copied once the store has opened whole.
std::shared_ptr<const CorpusStore> prepare_run_corpus(const std::string& out, PrepareOptions how, bool resuming);

// A store, mapped read-only. Opening reads the manifest and the lengths (checked
// against the manifest: sizes and digest), not the tokens.
class CorpusStore final : public PairSource {
 public:
  explicit CorpusStore(const std::string& dir);
  std::span<const PairLength> lengths() const override { return lengths_; }
  void read_pair(int64_t i, int64_t* src, int64_t* tgt) const override;
  uint64_t fingerprint() const override { return manifest_.fingerprint; }
  const StoreManifest& manifest() const { return manifest_; }
  const std::string& dir() const { return dir_; }
  std::string vocabulary_path() const { return dir_ + "/spm.model"; }

 private:
  static constexpr int64_t kBlock = 64;  // pairs per saved offset: pair i's is its block's plus the lengths before it
  std::string dir_;
  StoreManifest manifest_;
  std::unique_ptr<MappedFile> lengths_file_, tokens_file_;
  std::span<const PairLength> lengths_;
  std::vector<int64_t> block_offsets_;  // in ids
};

}  // namespace loom::models
