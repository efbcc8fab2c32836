// TrainerOptions' table (one row per option: flag, help, range, what a resume does
// with it), its saved form and its checks.
#include <nlohmann/json.hpp>

#include "loom/models/trainer.h"

namespace loom::models {

using nlohmann::json;

const std::vector<OptionField<TrainerOptions>>& TrainerOptions::fields() {
  using O = TrainerOptions;
  using enum OnResume;
  constexpr auto kMaxLen = static_cast<double>(TransformerConfig::kMaxLen);
  // Far above any rate that trains (the paper's factor is 1; 2 is common), low
  // enough that a typo of a few digits is caught before a run is spent on it.
  constexpr double kMaxLrFactor = 1e6;
  static const std::vector<OptionField<O>> table = {
      {"--max-tokens", "max_tokens", &O::max_tokens,
       "tokens per batch: sentences x longest side, so each side's padded tokens (source and target) stay within "
       "it; above --max-len (a batch holds a sentence)",
       at_least(2)},
      {"--accum", "accum", &O::accum, "batches per update (gradient accumulation: --max-tokens x this per update)",
       between(1, 1 << 20)},
      {"--max-len", "max_len", &O::max_len, "longest sentence kept, in pieces", between(1, kMaxLen - 1)},
      {"--epochs", "epochs", &O::epochs, "passes over the corpus", at_least(1), {}, may_change},
      {"--max-steps",
       "max_steps",
       &O::max_steps,
       "stop after this many updates (0: no limit)",
       at_least(0),
       {},
       may_change},
      {"--warmup", "warmup", &O::warmup, "Noam warm-up steps", at_least(1)},
      {"--lr-factor", "lr_factor", &O::lr_factor, "Noam factor", {.lo = 0, .hi = kMaxLrFactor, .above_lo = true}},
      {"--cooldown-epochs",
       "cooldown_epochs",
       &O::cooldown_epochs,
       "scale the Noam rate down linearly to ~0 over the last this-many of --epochs (0: off)",
       between(0, 1e6),
       {},
       may_change},
      {"--clip", "clip", &O::clip, "clip the global gradient norm to this (0: off)", between(0, 1e6)},
      {"--regroup-batches",
       "regroup_batches",
       &O::regroup_batches,
       "group each epoch's batches anew (sentences of equal lengths in a drawn order, so batch companions change) "
       "instead of the same batches in a new order",
       {},
       {},
       kept,
       /*switch_only=*/true},
      {"--pad-to", "pad_to", &O::pad_to,
       "round each batch's sentence count and both lengths up to a multiple of this with padding (empty sentences, "
       "pad tokens: the loss is unchanged, the work a little more) so that batch shapes repeat, for --cuda-graphs; "
       "1: off",
       between(1, 1024)},
      {"--label-smoothing",
       "label_smoothing",
       &O::label_smoothing,
       "label smoothing",
       {.lo = 0, .hi = 1, .below_hi = true}},
      {"--seed", "seed", &O::seed, "initialization, shuffling and dropout seed"},
      {"--log-every", "log_every", &O::log_every, "steps between progress lines", at_least(1), {}, may_change},
      {"--save-every",
       "save_every",
       &O::save_every,
       "also save a checkpoint every this many steps (0: at epoch ends only)",
       at_least(0),
       {},
       may_change},
      {"--save-minutes",
       "save_minutes",
       &O::save_minutes,
       "also save a checkpoint every this many minutes (0: off)",
       between(0, 1e6),
       {},
       may_change},
      {"--keep-last",
       "keep_last",
       &O::keep_last,
       "keep the last K checkpoints as step-<N>.safetensors (0: none)",
       between(0, 1 << 20),
       {},
       may_change},
      {"--keep-every",
       "keep_every",
       &O::keep_every,
       "also keep the weights every this many steps among the last K (step-<N>.safetensors; no validation or "
       "training state, so cheap: more models for --average-last); 0: off",
       at_least(0),
       {},
       may_change},
      {"--keep-per-epoch",
       "keep_per_epoch",
       &O::keep_per_epoch,
       "or keep the weights at this many evenly spaced points of each epoch, its end one of them (2: the middle "
       "and the end, whatever an epoch's steps); 0: off",
       at_least(0),
       {},
       may_change},
      {"--average-last",
       "average_last",
       &O::average_last,
       "at the end, average the last K checkpoints into <out>/average",
       between(0, 1 << 20),
       {},
       may_change},
      {"--reduce",
       "reduce",
       &O::reduce,
       "how an update's micro-batch gradients are summed: exact (a fixed tree over the micro-batch index: the same "
       "bits on any number of ranks), fast (MPI's own all-reduce across ranks: bits may differ with the rank "
       "count), off (added into the gradients one after another: one process only), auto: off for one process, "
       "exact under mpirun",
       {},
       std::vector<std::string_view>(kMicroBatchSumNames.begin(), kMicroBatchSumNames.end()),
       may_change},
      {"--shard-optimizer",
       "shard_optimizer",
       &O::shard_optimizer,
       "data-parallel runs: each rank keeps Adam's moments for 1/N of the parameters and updates those (ZeRO "
       "stage 1; the same bits, less memory per rank)",
       {},
       {},
       may_change,
       /*switch_only=*/true},
      {"--bucket-mb",
       "bucket_mb",
       &O::bucket_mb,
       "data-parallel runs: gradients are summed across ranks in buckets of about this many MiB, each as soon as "
       "backward has made it (PyTorch DDP's bucket_cap_mb; the bits do not change)",
       between(1e-6, 1e6),
       {},
       may_change},
      {"--overlap",
       "overlap",
       &O::overlap,
       "data-parallel runs: sum the buckets on a communication thread while backward runs (on), or after "
       "backward (off); the bits do not change",
       {},
       {},
       may_change},
      {"--cuda-graphs",
       "cuda_graphs",
       &O::cuda_graphs,
       "capture each batch shape's forward and backward as a CUDA graph the first time it is seen and replay it "
       "after (one launch in place of ~1,400; with --pad-to 8 the shapes repeat); one process on a GPU; the same "
       "losses as without",
       {},
       {},
       may_change,
       /*switch_only=*/true},
  };
  return table;
}

std::string TrainerOptions::to_json() const {
  json j = json::object();
  for (const auto& f : fields())
    std::visit(
        [&](auto member) {
          if constexpr (std::is_same_v<decltype(member), MicroBatchSum TrainerOptions::*>)
            j[f.key] = name_of(this->*member);
          else
            j[f.key] = this->*member;
        },
        f.member);
  return j.dump();
}

TrainerOptions TrainerOptions::from_json(const std::string& text) {
  const json j = json::parse(text);
  TrainerOptions o;
  for (const auto& f : fields()) {
    if (!j.contains(f.key)) continue;
    std::visit(
        [&](auto member) {
          if constexpr (std::is_same_v<decltype(member), MicroBatchSum TrainerOptions::*>)
            set_from_text(o, f, j.at(f.key).get<std::string>(), "the saved options");
          else
            j.at(f.key).get_to(o.*member);
        },
        f.member);
  }
  return o;
}

// The rows' ranges, then what no single row can say.
void TrainerOptions::validate() const {
  const TrainerOptions& o = *this;
  for (const auto& f : fields()) check_field(o, f, "train");
  LOOM_CHECK(o.max_tokens > o.max_len, "train: --max-tokens {} must exceed --max-len {} (a batch holds a sentence)",
             o.max_tokens, o.max_len);
  LOOM_CHECK(o.cooldown_epochs <= static_cast<double>(o.epochs),
             "train: --cooldown-epochs must be in [0, --epochs {}], got {}", o.epochs, o.cooldown_epochs);
  LOOM_CHECK(o.keep_every == 0 || o.keep_per_epoch == 0,
             "train: --keep-every {} and --keep-per-epoch {} both place snapshots; give one", o.keep_every,
             o.keep_per_epoch);
  const auto [flag, value] =
      o.keep_every > 0 ? std::pair("--keep-every", o.keep_every) : std::pair("--keep-per-epoch", o.keep_per_epoch);
  LOOM_CHECK(value == 0 || o.keep_last > 0 || o.average_last > 0,
             "train: {} {} keeps snapshots among the last --keep-last (or --average-last) models; give one of them",
             flag, value);
  LOOM_CHECK(o.average_last != 1, "train: --average-last 1 averages nothing; give 0 (off) or at least 2");
}

}  // namespace loom::models
