#pragma once
// `loom train`'s corpus: both sides of a split read and checked, the vocabulary
// trained (or a matching one reused), the pairs encoded and those that fit --max-len kept.
#include <string>
#include <vector>

#include "loom/models/data.h"

namespace loom::tools {

struct Split {
  std::string name, src_path, tgt_path;
  models::ParallelCorpus corpus;
};

// <data>/<name>.<src> and .<tgt> (or .gz), refused when empty or all blank:
// SentencePiece and the validation loss (0 / 0) gave messages that named neither
// the split nor the file.
Split read_split(const std::string& data, const std::string& src, const std::string& tgt, const std::string& name);

// Every pair of `corpus` as pieces (in parallel over the pairs).
std::vector<models::EncodedPair> encode(const models::Vocabulary& vocab, const models::ParallelCorpus& corpus);

// The pairs of a split that fit --max-len; says how many were dropped, and refuses a split left empty.
std::vector<models::EncodedPair> keep_fitting(std::vector<models::EncodedPair> pairs, const Split& split,
                                              int64_t max_len);

// The joint SentencePiece vocabulary <prefix>.model of a new run, trained on both
// sides of `train`; a leftover one is reused only when <prefix>.source.json says it
// was trained on this corpus with `pieces` pieces (else a new one is trained).
void prepare_vocabulary(const models::ParallelCorpus& train, const std::string& prefix, int64_t pieces);

}  // namespace loom::tools
