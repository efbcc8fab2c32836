#pragma once
// Training a Transformer as the paper does (section 5): Adam (0.9, 0.98, 1e-9),
// the Noam schedule, label smoothing, batches of similar-length pairs under a
// token budget, plus what a long run needs: gradient accumulation, global
// gradient-norm clipping, checkpoints every N steps or M minutes (the last K
// kept, the best by validation loss or by a score such as validation BLEU, the
// average of the last K), and exact
// resume: a run stopped at step N and resumed makes the same updates, bit for
// bit, as one that never stopped.
//
// A run folder holds
//   model.safetensors            the latest model (`loom translate --model <out>`)
//   training_state.safetensors   everything a resume needs: the parameters, Adam's
//                                moments and counts, the step, the position in the
//                                data order and both random streams' offsets
//   step-<N>.safetensors         the last `keep_last` models (for averaging)
//   best/model.safetensors       the model with the lowest validation loss so far, or
//                                the highest validation score (TrainerHooks::validation_score)
//   average/model.safetensors    the mean of the last `average_last` models (at the end)
// all written through loom/atomic_file.h; the state last, so it never names a
// step whose files are missing. The training state is not a model: its metadata
// says "format": "loom-training-state" and its extra tensors make nn::load refuse it.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "loom/dist/communicator.h"
#include "loom/dist/gradient_reducer.h"
#include "loom/models/data.h"
#include "loom/models/option_table.h"
#include "loom/models/transformer.h"
#include "loom/nn/checkpoint.h"
#include "loom/optim.h"

namespace loom::models {

class StepGraphs;  // --cuda-graphs (models/src/step_graphs.h)

// The Trainer's options. Each member's initializer is its default; its flag, help,
// range and what a resume or the ranks do with it are its row in fields().
struct TrainerOptions {
  // What the updates depend on: a resumed run keeps these.
  int64_t max_tokens = 4096;
  int64_t max_len = 128;
  int64_t accum = 1;
  int64_t warmup = 4000;
  double lr_factor = 1.0;
  double label_smoothing = 0.1;
  double clip = 0;
  uint64_t seed = 1;  // initialization and dropout (one stream), batch order (another)
  bool regroup_batches = false;
  int64_t pad_to = 1;  // batch shapes rounded up to multiples of this (1: as made)
  // What may change when a run is resumed.
  MicroBatchSum reduce = MicroBatchSum::automatic;
  int64_t epochs = 10, max_steps = 0;
  double cooldown_epochs = 0;  // a resume with more --epochs moves the cool-down to the new end
  int64_t log_every = 100;
  int64_t save_every = 0;
  double save_minutes = 0;
  int64_t keep_last = 0;
  int64_t keep_every = 0;  // a resume starts from the last checkpoint and writes these again
  int64_t keep_per_epoch = 0;
  int64_t average_last = 0;
  bool shard_optimizer = false;  // ZeRO stage 1: the same bits as unsharded, less memory
  double bucket_mb = 25;         // neither this nor overlap changes the bits
  bool overlap = true;
  bool cuda_graphs = false;  // each batch shape's forward and backward captured once, then replayed
  // Not options of a run: where it happens.
  Device device = kCPU;  // where the model, its gradients and Adam's moments live
  // The ranks of a data-parallel run (null: this process alone). With N ranks an
  // update is accum * N micro-batches, rank r running [r * accum, (r + 1) * accum);
  // every rank must give the same data and options. Must outlive the Trainer.
  dist::Communicator* comm = nullptr;

  // One row per option above (not device or comm), in the order `loom train --help` lists them.
  static const std::vector<OptionField<TrainerOptions>>& fields();
  std::string to_json() const;  // the saved fields, by their keys
  // The saved fields of `text` (a field it lacks keeps its default: a state saved before it existed).
  static TrainerOptions from_json(const std::string& text);
  void validate() const;  // every field in range, else a loom::Error naming the flag (the Trainer checks too)
};

// One update, as reported to the caller.
struct StepReport {
  int64_t step = 0, epoch = 0;
  double loss = 0;                         // mean per target token over the update's batches
  double window_loss = 0;                  // mean per target token since the last log step (log steps only)
  int64_t src_tokens = 0, tgt_tokens = 0;  // real tokens in the update
  double lr = 0;
  std::optional<double> grad_norm;  // before clipping; on log steps or when clipping
  // Data-parallel: seconds the step waited for the sums across ranks and (sharded) the
  // parameters' broadcast, the slowest rank included (exposed), and the time those
  // took in all, overlapped with backward or not (communication).
  double reduce_seconds = 0;
  double communication_seconds = 0;
  bool log = false;  // step % log_every == 0
};

struct Evaluation {
  int64_t step = 0, epoch = 0;
  double val_loss = 0;
  std::optional<double> val_score;  // TrainerHooks::validation_score's, when given
  bool best = false;                // the best so far (best/ was written)
  bool epoch_end = false;
  std::string saved;  // the checkpoint written
};

// Optional hooks; each may be empty.
struct TrainerHooks {
  std::function<void(int64_t step)> gradients_ready;  // after backward, before clipping and the update
  std::function<void(const StepReport&)> step_done;   // after the update
  std::function<void(const Evaluation&)> evaluated;   // after a checkpoint
  std::function<void(const std::string&)> message;    // other news (resumed, averaged, interrupted)
  // At each checkpoint, with the model in eval mode and no graph: a score of the
  // model, higher is better (e.g. greedy BLEU on the validation set). When set,
  // best/ keeps the highest score instead of the lowest validation loss.
  std::function<double(Transformer&)> validation_score;
  const std::atomic<bool>* stop = nullptr;  // set (e.g. by SIGINT): save the state and return
};

class Trainer {
 public:
  // A new run in `out` (a folder that exists): the model is initialized from
  // options.seed. `metadata` goes into every model file (e.g. the vocabulary's
  // name: a `vocabulary` entry is also copied into best/ and average/), and
  // `extra_state` into the training state (a tool's own options), returned by
  // extra_state() on resume.
  // `train`'s pairs that fit options.max_len are trained on (a corpus store's are
  // read as their batches are made); `val` is small and held.
  Trainer(TransformerConfig config, TrainerOptions options, std::shared_ptr<const PairSource> train,
          std::vector<EncodedPair> val, std::string out, std::map<std::string, std::string> metadata = {},
          std::map<std::string, std::string> extra_state = {});
  Trainer(TransformerConfig config, TrainerOptions options, std::vector<EncodedPair> train,
          std::vector<EncodedPair> val, std::string out, std::map<std::string, std::string> metadata = {},
          std::map<std::string, std::string> extra_state = {});
  ~Trainer();
  // Continues the run whose state is <out>/training_state.safetensors, with the
  // same training pairs (checked: a different corpus is an error naming the
  // counts). `changes`, if given, edits the saved options before the run is
  // rebuilt: the caller's business to change only those that may change.
  static std::unique_ptr<Trainer> resume(const std::string& out, std::shared_ptr<const PairSource> train,
                                         std::vector<EncodedPair> val,
                                         const std::function<void(TrainerOptions&)>& changes = {});
  static std::unique_ptr<Trainer> resume(const std::string& out, std::vector<EncodedPair> train,
                                         std::vector<EncodedPair> val,
                                         const std::function<void(TrainerOptions&)>& changes = {});
  // What a run folder's state says without building anything: options, config, extras.
  struct SavedRun {
    TrainerOptions options;
    TransformerConfig config;
    std::map<std::string, std::string> metadata, extra_state;
    int64_t step = 0;
  };
  static SavedRun read_state(const std::string& out);
  static std::string state_path(const std::string& out);

  // Trains until options.epochs or options.max_steps, or until *hooks.stop is
  // set (then only the state is saved; returns false). A non-finite loss or
  // parameter stops with a loom::Error naming the step, before anything is saved.
  bool run(const TrainerHooks& hooks = {});

  // The mean label-smoothed loss per target token of `batches` (eval mode, no graph).
  double evaluate(const std::vector<Batch>& batches);
  // The gradients of one update over `batches` (each batch's loss weighted by its
  // share of the target tokens: the same gradient as one batch holding them all,
  // up to rounding); returns the loss. Throws on a non-finite loss.
  double accumulate_gradients(const std::vector<Batch>& batches, int64_t step);
  // Micro-batches per update, over all ranks: accum, times the world size when data-parallel.
  int64_t batches_per_update() const;
  bool is_main_rank() const { return comm_->rank() == 0; }  // the one that prints and writes

  Transformer& model() { return *model_; }
  const TransformerConfig& config() const { return config_; }
  const TrainerOptions& options() const { return options_; }
  // Data-parallel runs (--reduce exact or fast): how the gradients are summed; else null.
  const dist::GradientReducer* reducer() const { return reducer_.get(); }
  int64_t step() const { return step_; }
  int64_t epoch() const { return epoch_; }  // the epoch under way (options.epochs + 1 once all are done)
  // Whether run() has nothing left to do: options.epochs done, or options.max_steps reached.
  bool finished() const { return epoch_ > options_.epochs || (options_.max_steps > 0 && step_ >= options_.max_steps); }
  const std::map<std::string, std::string>& extra_state() const { return extra_state_; }
  int64_t val_pairs() const { return static_cast<int64_t>(val_.size()); }
  int64_t train_pairs() const { return fitting_count_; }  // those within max_len
  // --cuda-graphs: the batch shapes captured so far (0 without it, or after a failed capture).
  size_t captured_shapes() const;
  // Bytes of Adam's moments: this rank's, and all ranks' (equal unless sharded).
  std::pair<int64_t, int64_t> optimizer_state_bytes() const;

 private:
  struct Restored {};  // built for resume(): the state's files are its own
  Trainer(Restored, TransformerConfig config, TrainerOptions options, std::shared_ptr<const PairSource> train,
          std::vector<EncodedPair> val, std::string out, std::map<std::string, std::string> metadata,
          std::map<std::string, std::string> extra_state);
  bool data_parallel() const { return options_.reduce != MicroBatchSum::off; }
  bool sharded() const { return options_.shard_optimizer && comm_->world_size() > 1; }
  // The parameters (indices) whose moments `rank` keeps and updates: all when not sharded.
  std::vector<size_t> owned_by(int rank) const;
  // After a sharded update: each owner's parameters to every rank.
  void share_updated_parameters();
  // Adam's state for every parameter (a moment undefined where its count is 0):
  // when sharded, gathered from the owners (a collective: every rank calls it).
  struct Moments {
    std::vector<Tensor> m, v;
    std::vector<int64_t> counts;
    int64_t steps = 0;
  };
  Moments optimizer_moments() const;
  // One micro-batch's mean label-smoothed loss per target token (the model's mode decides dropout).
  Tensor batch_loss(const Batch& host_batch);
  static Tensor loss_times_tokens(const Tensor& loss, int64_t tokens);
  void zero_grad();  // every parameter's, owned or not
  // accumulate_gradients when data_parallel(): this rank's share of `batches` (the
  // global update), summed in the tree and across ranks into every parameter's .grad.
  double accumulate_data_parallel(const std::vector<Batch>& batches, int64_t step);
  void set_flat_gradients(const Tensor& flat);
  bool any_rank(bool here);                        // whether `here` holds on any rank: a collective
  bool stop_requested(const TrainerHooks& hooks);  // on any rank: a collective when data-parallel
  // The steps of run(): the cool-down's place for an epoch of `batches_in_epoch`; one
  // update over `update` (the report step_done gets); a checkpoint or snapshot when
  // one is due after it; the state saved when stopped.
  void schedule_cooldown(int64_t batches_in_epoch);
  StepReport take_step(const std::vector<Batch>& update, const TrainerHooks& hooks);
  // The micro-batches [first, first + n) of an epoch's `plan`: this rank's made, the others' only counted.
  std::vector<Batch> update_batches(const BatchPlan& plan, int64_t first, int64_t n) const;
  void save_if_due(const TrainerHooks& hooks, int64_t update_size, int64_t batches_in_epoch);
  void save_interrupted(const TrainerHooks& hooks);
  void save_checkpoint(const TrainerHooks& hooks, bool epoch_end);
  void save_state(const Moments& moments);
  void check_finite_parameters(const char* when) const;
  [[noreturn]] void diverged(const std::string& what, int64_t step, double value) const;
  // What every saved model carries: the run's metadata (vocabulary, ...), the configuration, the step and `epoch`.
  nn::Metadata model_metadata(int64_t epoch) const;
  void keep_model(const nn::Metadata& meta);  // as step-<N>.safetensors, the oldest beyond the last K removed
  void prune_kept();
  void keep_snapshot();  // the weights alone as a kept step-<N> file (keep_every, keep_per_epoch)
  // Whether the update that took the epoch's batches [before, after) of `count` ends
  // with a snapshot (an epoch's end keeps its checkpoint instead).
  bool snapshot_due(int64_t before, int64_t after, int64_t count) const;
  void write_average(const TrainerHooks& hooks);

  TransformerConfig config_;
  TrainerOptions options_;
  std::shared_ptr<const PairSource> train_;
  int64_t fitting_count_ = 0;  // train_'s pairs within max_len (listed again for each epoch's plan: 4 bytes a pair)
  std::vector<uint32_t> fitting() const { return fitting_pairs(train_->lengths(), options_.max_len); }
  std::vector<EncodedPair> val_;
  std::string out_;
  std::map<std::string, std::string> metadata_, extra_state_;
  std::unique_ptr<dist::Communicator> own_comm_;  // "self", when options.comm is null
  dist::Communicator* comm_ = nullptr;
  Generator gen_, shuffle_;  // declared before the model: it draws its initialization from gen_
  std::unique_ptr<Transformer> model_;
  std::vector<Tensor> params_;
  std::vector<std::string> param_names_;
  std::vector<size_t> owned_;                              // owned_by(this rank): what adam_ updates
  std::unique_ptr<dist::GradientReducer> reducer_;         // data-parallel runs: the gradients' sum
  double reduce_seconds_ = 0, communication_seconds_ = 0;  // of the last update, for its StepReport
  std::unique_ptr<optim::Adam> adam_;
  std::unique_ptr<optim::Noam> noam_;
  std::vector<Batch> val_batches_;
  std::unique_ptr<StepGraphs> graphs_;  // --cuda-graphs
  std::string graphs_news_;             // a capture's fallback, for the message hook

  // Where the run is: restored by resume.
  int64_t step_ = 0, epoch_ = 1, batch_in_epoch_ = 0;
  uint64_t epoch_shuffle_offset_ = 0;  // shuffle_'s offset before this epoch's batches were drawn
  double window_loss_ = 0, window_tokens_ = 0;
  double best_val_loss_ = 0, best_val_score_ = 0;
  bool has_best_ = false, has_best_score_ = false;
  int64_t last_checkpoint_step_ = -1;
  std::string last_saved_;  // for the divergence message
  std::chrono::steady_clock::time_point last_save_time_;
};

}  // namespace loom::models
