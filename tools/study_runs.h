#pragma once
// Small real training runs for the studies that compare recipes (label
// smoothing, post-norm vs pre-norm, warm-up): the tiny preset on the first
// --sentences pairs of a Multi30k-layout corpus, minutes on two cores.
#include <functional>
#include <memory>

#include "loom/models.h"
#include "study.h"

namespace loom::tools {

struct StudyCorpus {
  std::unique_ptr<models::Vocabulary> vocab;
  std::vector<models::EncodedPair> train, val;
  std::vector<std::string> val_sources, val_references;  // the kept validation pairs, as text
};

// The first o.sentences training pairs and the first `val_sentences` validation
// pairs of o.data (de -> en), a joint vocabulary of `pieces` trained
// on the training part into <out>/<study>-spm.model. Pairs over 64 pieces are left out.
StudyCorpus load_study_corpus(const StudyOptions& o, const std::string& study, int64_t pieces, int64_t val_sentences);

struct TinyRun {
  bool pre_norm = false;
  int64_t warmup = 100;
  double smoothing = 0.1;
  int64_t steps = 200;
};

// Trains the tiny preset (dropout 0.1, Adam 0.9/0.98/1e-9, Noam with factor 1,
// batches of at most 512 padded tokens). After each backward, before the
// optimizer's step, `watch(step, loss, model)` sees the gradients; after the
// step, `evaluate(step, model)` may measure the model (it is put in eval mode
// for the call and back in training mode after).
using StepWatcher = std::function<void(int64_t step, double loss, models::Transformer& model)>;
using StepEvaluator = std::function<void(int64_t step, models::Transformer& model)>;
std::unique_ptr<models::Transformer> train_tiny(const StudyCorpus& corpus, const TinyRun& run, uint64_t seed,
                                                const StepWatcher& watch = {}, const StepEvaluator& evaluate = {});

// Validation cross-entropy per target token without smoothing (its exp is the perplexity).
double validation_cross_entropy(models::Transformer& model, const StudyCorpus& corpus);
// Corpus BLEU of greedy translations of the validation sources.
double validation_bleu(models::Transformer& model, const StudyCorpus& corpus);

}  // namespace loom::tools
