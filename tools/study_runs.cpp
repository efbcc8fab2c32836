#include "study_runs.h"

#include <filesystem>

#include "loom/ops.h"
#include "loom/optim.h"

namespace loom::tools {

namespace {

constexpr int64_t kMaxLen = 64, kMaxTokens = 512;

// A split of the study's German -> English corpus under --data (an empty or blank file is
// named, as `loom train` names it).
models::ParallelCorpus read_split(const StudyOptions& o, const std::string& split) {
  return models::read_split(o.data, "de", "en", split, "study").corpus;
}

}  // namespace

StudyCorpus load_study_corpus(const StudyOptions& o, const std::string& study, int64_t pieces, int64_t val_sentences) {
  LOOM_CHECK(!o.data.empty(),
             "study {}: --data is required (a folder with train.de/.en and val.de/.en, plain or "
             ".gz, e.g. Multi30k)",
             study);
  models::ParallelCorpus train = read_split(o, "train"), val = read_split(o, "val");
  const auto keep = static_cast<size_t>(o.sentences);
  if (train.src.size() > keep) train.src.resize(keep), train.tgt.resize(keep);
  std::vector<std::string> both = train.src;
  both.insert(both.end(), train.tgt.begin(), train.tgt.end());
  const std::string prefix = o.out + "/" + study + "-spm";
  models::Vocabulary::train(both, prefix, pieces);
  StudyCorpus corpus;
  corpus.vocab = std::make_unique<models::Vocabulary>(prefix + ".model");
  auto add = [&](const models::ParallelCorpus& c, std::vector<models::EncodedPair>& pairs, size_t limit, bool text) {
    for (size_t i = 0; i < c.src.size() && pairs.size() < limit; ++i) {
      models::EncodedPair p{corpus.vocab->encode(c.src[i]), corpus.vocab->encode(c.tgt[i])};
      if (p.src.empty() || p.tgt.empty() || !models::fits(p, kMaxLen)) continue;
      pairs.push_back(std::move(p));
      if (text) corpus.val_sources.push_back(c.src[i]), corpus.val_references.push_back(c.tgt[i]);
    }
  };
  add(train, corpus.train, keep, false);
  add(val, corpus.val, static_cast<size_t>(val_sentences), true);
  LOOM_CHECK(!corpus.train.empty() && !corpus.val.empty(), "study {}: no sentence pair of '{}' fits {} pieces", study,
             o.data, kMaxLen);
  return corpus;
}

std::unique_ptr<models::Transformer> train_tiny(const StudyCorpus& corpus, const TinyRun& run, uint64_t seed,
                                                const StepWatcher& watch, const StepEvaluator& evaluate) {
  models::TransformerConfig config = models::presets::tiny(corpus.vocab->size());
  config.pad_id = models::Vocabulary::kPad;
  config.pre_norm = run.pre_norm;
  Generator gen(seed), shuffle(seed + 1);
  auto model = std::make_unique<models::Transformer>(config, gen);
  optim::Adam adam(model->parameters(), {.lr = 0, .betas = {0.9, 0.98}, .eps = 1e-9});
  optim::Noam noam(adam, config.d_model, run.warmup);
  model->train();
  for (int64_t step = 0; step < run.steps;) {
    for (const models::Batch& b : models::make_batches(corpus.train, kMaxTokens, kMaxLen, shuffle)) {
      Tensor loss =
          label_smoothed_cross_entropy((*model)(b.src, b.tgt_in), b.tgt_out, run.smoothing, models::Vocabulary::kPad);
      adam.zero_grad();
      loss.backward();
      ++step;
      if (watch) watch(step, loss.item<double>(), *model);
      noam.step();
      adam.step();
      if (evaluate) {
        model->eval();
        evaluate(step, *model);
        model->train();
      }
      if (step >= run.steps) break;
    }
  }
  model->eval();
  return model;
}

double validation_cross_entropy(models::Transformer& model, const StudyCorpus& corpus) {
  NoGradGuard no_grad;
  Generator order(0);
  double total = 0, tokens = 0;
  for (const models::Batch& b : models::make_batches(corpus.val, kMaxTokens, kMaxLen, order)) {
    total +=
        label_smoothed_cross_entropy(model(b.src, b.tgt_in), b.tgt_out, 0.0, models::Vocabulary::kPad).item<double>() *
        static_cast<double>(b.tgt_tokens);
    tokens += static_cast<double>(b.tgt_tokens);
  }
  return total / tokens;
}

double validation_bleu(models::Transformer& model, const StudyCorpus& corpus) {
  std::vector<std::vector<int64_t>> sources;
  for (const models::EncodedPair& pair : corpus.val) sources.push_back(pair.src);
  return models::greedy_bleu(model, *corpus.vocab, sources, corpus.val_references, 10);
}

}  // namespace loom::tools
