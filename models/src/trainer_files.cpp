// The Trainer's files in its run folder: checkpoints (model, best/, average/, kept
// step-N files), the training state, and resuming from it.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "loom/atomic_file.h"
#include "loom/error.h"
#include "loom/models/trainer.h"
#include "loom/nn.h"
#include "loom/ops.h"
#include "trainer_files.h"

namespace loom::models {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {
constexpr const char* kStateFormat = "loom-training-state";
constexpr const char* kStateVersion = "1";
}  // namespace

int64_t kept_count(const TrainerOptions& o) { return std::max(o.keep_last, o.average_last); }

std::string kept_name(int64_t step) { return fmt::format("step-{:08d}.safetensors", step); }

void Trainer::save_checkpoint(const TrainerHooks& hooks, bool epoch_end) {
  const Moments moments = optimizer_moments();  // a collective when sharded: every rank, before rank 0 writes
  if (!is_main_rank()) {                        // rank 0 evaluates and writes; the others' parameters are the same bits
    last_checkpoint_step_ = step_;
    last_save_time_ = std::chrono::steady_clock::now();  // every rank's clock restarts with rank 0's save
    return;
  }
  Evaluation e{.step = step_, .epoch = epoch_end ? epoch_ - 1 : epoch_, .epoch_end = epoch_end};
  e.val_loss = evaluate(val_batches_);
  if (!std::isfinite(e.val_loss)) diverged("the validation loss", step_, e.val_loss);
  check_finite_parameters("checkpoint");
  nn::Metadata meta = model_metadata(e.epoch);
  meta["val_loss"] = fmt::format("{:.6f}", e.val_loss);
  if (hooks.validation_score) {
    NoGradGuard no_grad;
    nn::EvalModeGuard eval(*model_);
    e.val_score = hooks.validation_score(*model_);
    meta["val_score"] = fmt::format("{:.6f}", *e.val_score);
  }
  if (kept_count(options_) > 0) keep_model(meta);
  const std::string latest = (fs::path(out_) / "model.safetensors").string();
  nn::save(*model_, latest, meta);
  e.saved = latest;
  const bool better =
      e.val_score ? !has_best_score_ || *e.val_score > best_val_score_ : !has_best_ || e.val_loss < best_val_loss_;
  if (better) {
    const fs::path best = fs::path(out_) / "best";
    fs::create_directories(best);
    nn::save(*model_, (best / "model.safetensors").string(), meta);
    if (metadata_.count("vocabulary") && !fs::exists(best / metadata_.at("vocabulary")))
      copy_file((fs::path(out_) / metadata_.at("vocabulary")).string(), (best / metadata_.at("vocabulary")).string());
    best_val_loss_ = e.val_loss;
    has_best_ = e.best = true;
    if (e.val_score) {
      best_val_score_ = *e.val_score;
      has_best_score_ = true;
    }
  }
  last_checkpoint_step_ = step_;
  last_saved_ = fmt::format("'{}' keeps step {}", latest, step_);
  save_state(moments);
  last_save_time_ = std::chrono::steady_clock::now();
  if (hooks.evaluated) hooks.evaluated(e);
}

nn::Metadata Trainer::model_metadata(int64_t epoch) const {
  nn::Metadata meta(metadata_.begin(), metadata_.end());
  meta["config"] = config_.to_json();
  meta["step"] = std::to_string(step_);
  meta["epoch"] = std::to_string(epoch);
  return meta;
}

void Trainer::keep_snapshot() {
  if (!is_main_rank()) return;  // the others' parameters are the same bits
  check_finite_parameters("snapshot");
  keep_model(model_metadata(epoch_));
}

void Trainer::keep_model(const nn::Metadata& meta) {
  nn::save(*model_, (fs::path(out_) / kept_name(step_)).string(), meta);
  prune_kept();
}

void Trainer::prune_kept() {
  auto kept = kept_checkpoints(out_);
  const auto keep = static_cast<size_t>(kept_count(options_));
  for (size_t i = 0; i + keep < kept.size(); ++i) fs::remove(kept[i].second);
}

void Trainer::write_average(const TrainerHooks& hooks) {
  if (options_.average_last < 2 || !is_main_rank()) return;
  auto kept = kept_checkpoints(out_);
  const size_t k = std::min(kept.size(), static_cast<size_t>(options_.average_last));
  if (k < 2) {
    if (hooks.message)
      hooks.message(fmt::format("--average-last {}: only {} checkpoint(s) kept; nothing averaged",
                                options_.average_last, kept.size()));
    return;
  }
  std::vector<std::string> paths;
  for (size_t i = kept.size() - k; i < kept.size(); ++i) paths.push_back(kept[i].second.string());
  const fs::path dir = fs::path(out_) / "average";
  fs::create_directories(dir);
  nn::average_checkpoints(paths, (dir / "model.safetensors").string());
  if (metadata_.count("vocabulary"))
    copy_file((fs::path(out_) / metadata_.at("vocabulary")).string(), (dir / metadata_.at("vocabulary")).string());
  if (hooks.message)
    hooks.message(fmt::format("averaged the last {} checkpoints (steps {} to {}) -> {}", k, kept[kept.size() - k].first,
                              kept.back().first, (dir / "model.safetensors").string()));
}

// The state: the parameters under their own names, Adam's moments beside them,
// and where the run is in its metadata.
void Trainer::save_state(const Moments& moments) {
  nn::NamedTensors tensors;
  for (size_t k = 0; k < params_.size(); ++k) tensors.emplace_back(param_names_[k], params_[k]);
  const auto& m = moments.m;
  const auto& v = moments.v;
  for (size_t k = 0; k < params_.size(); ++k)
    if (m[k].defined()) {
      tensors.emplace_back("adam.m." + param_names_[k], m[k]);
      tensors.emplace_back("adam.v." + param_names_[k], v[k]);
    }
  json progress = {{"step", step_},
                   {"epoch", epoch_},
                   {"batch_in_epoch", batch_in_epoch_},
                   {"epoch_shuffle_offset", epoch_shuffle_offset_},
                   {"dropout_offset", gen_.offset()},
                   {"window_loss", window_loss_},
                   {"window_tokens", window_tokens_},
                   {"last_checkpoint_step", last_checkpoint_step_},
                   {"adam_steps", moments.steps},
                   {"adam_counts", moments.counts},
                   {"train_pairs", fitting_count_},
                   {"corpus_fingerprint", train_->fingerprint()}};
  if (has_best_) progress["best_val_loss"] = best_val_loss_;
  if (has_best_score_) progress["best_val_score"] = best_val_score_;
  nn::Metadata meta = {{"format", kStateFormat},
                       {"version", kStateVersion},
                       {"config", config_.to_json()},
                       {"options", options_.to_json()},
                       {"progress", progress.dump()},
                       {"metadata", json(metadata_).dump()},
                       {"extra", json(extra_state_).dump()}};
  nn::save_safetensors(state_path(out_), tensors, meta);
}

Trainer::SavedRun Trainer::read_state(const std::string& out) {
  const std::string path = state_path(out);
  LOOM_CHECK(fs::exists(path), "train: --resume '{}': no training state '{}' (the run saved none yet?)", out, path);
  const nn::Metadata meta = nn::load_safetensors_metadata(path);
  auto field = [&](const char* key) -> const std::string& {
    auto it = meta.find(key);
    LOOM_CHECK(it != meta.end(), "train: '{}' is not a loom training state: no '{}' in its metadata", path, key);
    return it->second;
  };
  LOOM_CHECK(field("format") == kStateFormat && field("version") == kStateVersion,
             "train: '{}' is a '{}' file of version {}, not a loom training state of version {}", path, field("format"),
             field("version"), kStateVersion);
  SavedRun run;
  try {
    run.options = TrainerOptions::from_json(field("options"));
    run.metadata = json::parse(field("metadata")).get<std::map<std::string, std::string>>();
    run.extra_state = json::parse(field("extra")).get<std::map<std::string, std::string>>();
    run.step = json::parse(field("progress")).at("step").get<int64_t>();
  } catch (const json::exception& e) {
    fail("train: cannot read the training state '{}': {}", path, e.what());
  }
  run.config = TransformerConfig::from_json(field("config"));
  return run;
}

std::unique_ptr<Trainer> Trainer::resume(const std::string& out, std::vector<EncodedPair> train,
                                         std::vector<EncodedPair> val,
                                         const std::function<void(TrainerOptions&)>& changes) {
  return resume(out, std::make_shared<PairsInMemory>(std::move(train)), std::move(val), changes);
}

std::unique_ptr<Trainer> Trainer::resume(const std::string& out, std::shared_ptr<const PairSource> train,
                                         std::vector<EncodedPair> val,
                                         const std::function<void(TrainerOptions&)>& changes) {
  SavedRun saved = read_state(out);
  const std::string path = state_path(out);
  TrainerOptions options = saved.options;
  if (changes) changes(options);
  // The model is built without random weights (nn::load below replaces every one,
  // and the dropout generator's offset comes from the state): nothing to draw.
  std::unique_ptr<Trainer> t;
  {
    nn::SkipInit skip_init;
    t.reset(new Trainer(Restored{}, saved.config, options, std::move(train), std::move(val), out, saved.metadata,
                        saved.extra_state));
  }
  nn::TensorFile file = nn::load_safetensors(path);
  std::map<std::string, Tensor> by_name(file.tensors.begin(), file.tensors.end());
  nn::load(*t->model_, file, path, /*allow_unexpected=*/true);  // checks every name, shape and dtype
  try {
    const json p = json::parse(file.metadata.at("progress"));
    // The corpus's fingerprint (a store's, from its manifest); a state saved before
    // stores has the digest of the pairs within max_len, read once here.
    const auto pairs = p.at("train_pairs").get<int64_t>();
    const bool same_count = pairs == t->fitting_count_;
    const bool same_pairs = p.contains("corpus_fingerprint")
                                ? p.at("corpus_fingerprint").get<uint64_t>() == t->train_->fingerprint()
                                : p.at("train_fingerprint").get<uint64_t>() == fingerprint(*t->train_, t->fitting());
    LOOM_CHECK(same_count && same_pairs,
               "train: --resume '{}': the training data differs from the run's ({} pairs now, {} then{}); a resumed "
               "run needs the same corpus, vocabulary and --max-len",
               out, t->fitting_count_, pairs, same_count ? ", same count but other sentences" : "");
    const auto counts = p.at("adam_counts").get<std::vector<int64_t>>();
    LOOM_CHECK(counts.size() == t->params_.size(), "train: '{}' has Adam counts for {} parameters, the model has {}",
               path, counts.size(), t->params_.size());
    std::vector<Tensor> m(counts.size()), v(counts.size());
    for (size_t k = 0; k < counts.size(); ++k) {
      if (counts[k] == 0) continue;
      auto mi = by_name.find("adam.m." + t->param_names_[k]), vi = by_name.find("adam.v." + t->param_names_[k]);
      LOOM_CHECK(mi != by_name.end() && vi != by_name.end(), "train: '{}' has no Adam moments for '{}'", path,
                 t->param_names_[k]);
      m[k] = mi->second.to(t->options_.device);
      v[k] = vi->second.to(t->options_.device);
    }
    // This rank's share (all of it unless sharded): a state saved at any number of ranks.
    std::vector<Tensor> owned_m, owned_v;
    std::vector<int64_t> owned_counts;
    for (size_t k : t->owned_) {
      owned_m.push_back(m[k]);
      owned_v.push_back(v[k]);
      owned_counts.push_back(counts[k]);
    }
    t->adam_->load_state(owned_m, owned_v, owned_counts, p.at("adam_steps").get<int64_t>());
    t->step_ = p.at("step").get<int64_t>();
    t->noam_->set_current_step(t->step_);
    t->epoch_ = p.at("epoch").get<int64_t>();
    t->batch_in_epoch_ = p.at("batch_in_epoch").get<int64_t>();
    t->epoch_shuffle_offset_ = p.at("epoch_shuffle_offset").get<uint64_t>();
    t->gen_.set_offset(p.at("dropout_offset").get<uint64_t>());
    t->window_loss_ = p.at("window_loss").get<double>();
    t->window_tokens_ = p.at("window_tokens").get<double>();
    t->last_checkpoint_step_ = p.at("last_checkpoint_step").get<int64_t>();
    if (p.contains("best_val_loss")) {
      t->has_best_ = true;
      t->best_val_loss_ = p.at("best_val_loss").get<double>();
    }
    if (p.contains("best_val_score")) {
      t->has_best_score_ = true;
      t->best_val_score_ = p.at("best_val_score").get<double>();
    }
  } catch (const json::exception& e) {
    fail("train: cannot read the training state '{}': {}", path, e.what());
  }
  t->last_saved_ = fmt::format("'{}' keeps step {}", path, t->step_);
  // Kept models past the state's step are from a run killed after writing them and
  // before its next state: this run takes those steps again (with its own options),
  // and only its models may be averaged.
  if (t->is_main_rank())
    for (const auto& [step, file] : kept_checkpoints(out))
      if (step > t->step_) fs::remove(file);
  return t;
}

}  // namespace loom::models
