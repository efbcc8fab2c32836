// The Trainer: options, one update (accumulated micro-batches, clipping, the Noam
// step), evaluation and the loop. Its files (checkpoints, kept steps, the average,
// the training state and resume) are trainer_files.cpp.
#include "loom/models/trainer.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "loom/atomic_file.h"
#include "loom/byte_hash.h"
#include "loom/dist/gradient_reducer.h"
#include "loom/dist/tree_sum.h"
#include "loom/error.h"
#include "loom/nn.h"
#include "step_graphs.h"
#include "trainer_files.h"
#include "loom/ops.h"

namespace loom::models {

namespace fs = std::filesystem;

namespace {

// Dropout offsets of a data-parallel update: micro-batch g of step s starts at
// ((s - 1) * M + g + 1) << kDropoutStrideBits (M micro-batches per update), above
// the initialization's offsets, and each micro-batch's calls (one offset per dropout)
// must stay below the next one's start.
constexpr int kDropoutStrideBits = 16;

bool all_finite(const Tensor& t) {
  NoGradGuard no_grad;
  // A sum in float64 is non-finite exactly when an element is (float32 values cannot overflow it).
  return std::isfinite(sum(abs(to_dtype(t.detach(), DType::f64))).to(kCPU).item<double>());
}

}  // namespace

std::string Trainer::state_path(const std::string& out) {
  return (fs::path(out) / "training_state.safetensors").string();
}

Trainer::Trainer(TransformerConfig config, TrainerOptions options, std::vector<EncodedPair> train,
                 std::vector<EncodedPair> val, std::string out, std::map<std::string, std::string> metadata,
                 std::map<std::string, std::string> extra_state)
    : Trainer(std::move(config), options, std::make_shared<PairsInMemory>(std::move(train)), std::move(val),
              std::move(out), std::move(metadata), std::move(extra_state)) {}

Trainer::Trainer(TransformerConfig config, TrainerOptions options, std::shared_ptr<const PairSource> train,
                 std::vector<EncodedPair> val, std::string out, std::map<std::string, std::string> metadata,
                 std::map<std::string, std::string> extra_state)
    : Trainer(Restored{}, std::move(config), options, std::move(train), std::move(val), std::move(out),
              std::move(metadata), std::move(extra_state)) {
  if (kept_count(options_) > 0) {
    // A new run: keeping and averaging would mix in another run's models.
    auto old = kept_checkpoints(out_);
    LOOM_CHECK(old.empty(),
               "train: '{}' already holds {} checkpoint(s) of another run ({} ...): resume that run, or "
               "train into another folder",
               out_, old.size(), old.front().second.string());
  }
}

Trainer::Trainer(Restored, TransformerConfig config, TrainerOptions options, std::shared_ptr<const PairSource> train,
                 std::vector<EncodedPair> val, std::string out, std::map<std::string, std::string> metadata,
                 std::map<std::string, std::string> extra_state)
    : config_(std::move(config)),
      options_(options),
      train_(std::move(train)),
      val_(std::move(val)),
      out_(std::move(out)),
      metadata_(std::move(metadata)),
      extra_state_(std::move(extra_state)),
      comm_(options.comm),
      gen_(options.seed),
      shuffle_(options.seed + 1) {
  options_.validate();
  if (!comm_) {
    own_comm_ = dist::make_communicator("self");
    comm_ = own_comm_.get();
  }
  options_.comm = comm_;
  const int world = comm_->world_size();
  if (options_.reduce == MicroBatchSum::automatic)
    options_.reduce = world > 1 ? MicroBatchSum::exact : MicroBatchSum::off;
  LOOM_CHECK(world == 1 || options_.reduce != MicroBatchSum::off,
             "train: --reduce off adds micro-batches into .grad within one process; with {} ranks give --reduce exact "
             "or fast",
             world);
  LOOM_CHECK(train_ && train_->size() > 0 && !val_.empty(),
             "train: {} training and {} validation pairs; both must be non-empty", train_ ? train_->size() : 0,
             val_.size());
  fitting_count_ = count_fitting(train_->lengths(), options_.max_len);
  LOOM_CHECK(fitting_count_ > 0, "train: --max-len {} drops all {} training pairs", options_.max_len, train_->size());
  LOOM_CHECK(fs::is_directory(out_), "train: the run folder '{}' does not exist", out_);
  model_ = std::make_unique<Transformer>(config_, gen_);  // initialized on the CPU: the same weights anywhere
  model_->to(options_.device);
  for (auto& [name, p] : model_->named_parameters()) {
    param_names_.push_back(name);
    params_.push_back(p);
  }
  if (data_parallel())
    reducer_ = std::make_unique<dist::GradientReducer>(
        *comm_, params_, options_.accum,
        dist::GradientReducerOptions{
            .mode = options_.reduce == MicroBatchSum::fast ? dist::Reduce::fast : dist::Reduce::exact,
            .bucket_bytes = std::max<int64_t>(1, static_cast<int64_t>(options_.bucket_mb * (1 << 20))),
            .overlap = options_.overlap});
  owned_ = owned_by(comm_->rank());
  std::vector<Tensor> owned;
  for (size_t k : owned_) owned.push_back(params_[k]);
  adam_ = std::make_unique<optim::Adam>(owned, optim::AdamOptions{.lr = 0, .betas = {0.9, 0.98}, .eps = 1e-9});
  noam_ = std::make_unique<optim::Noam>(*adam_, config_.d_model, options_.warmup, options_.lr_factor);
  if (options_.cuda_graphs) {
    LOOM_CHECK(!data_parallel(),
               "train: --cuda-graphs runs one process (data-parallel ranks sum gradients while backward runs, which "
               "is not captured)");
    LOOM_CHECK(!options_.device.is_cpu(),
               "train: --cuda-graphs needs a GPU (--device cuda): the CPU runs each op "
               "as it is issued");
    graphs_ = std::make_unique<StepGraphs>(*model_, params_, gen_, options_.label_smoothing, config_.pad_id,
                                           [this](const std::string& news) { graphs_news_ = news; });
  }
  val_batches_ = make_batches(val_, options_.max_tokens, options_.max_len, shuffle_);
  epoch_shuffle_offset_ = shuffle_.offset();
  last_saved_ = fmt::format("nothing was saved in '{}'", out_);
  last_save_time_ = std::chrono::steady_clock::now();
}

Trainer::~Trainer() = default;

size_t Trainer::captured_shapes() const { return graphs_ ? graphs_->captured_shapes() : 0; }

// Batches are made on the CPU (padded there: --pad-to); the model reads them where it lives.
static Batch on_device(const Batch& b, Device device) {
  if (b.src.device() == device) return b;
  return {b.src.to(device), b.tgt_in.to(device), b.tgt_out.to(device), b.src_tokens, b.tgt_tokens};
}

Tensor Trainer::batch_loss(const Batch& host_batch) {
  const Batch b = on_device(padded_to(host_batch, options_.pad_to), options_.device);
  return label_smoothed_cross_entropy(model_->forward(b.src, b.tgt_in), b.tgt_out, options_.label_smoothing,
                                      config_.pad_id);
}

// ---- one update ----
double Trainer::accumulate_gradients(const std::vector<Batch>& batches, int64_t step) {
  if (data_parallel()) return accumulate_data_parallel(batches, step);
  double total_tokens = 0;
  for (const Batch& b : batches) total_tokens += static_cast<double>(b.tgt_tokens);
  LOOM_CHECK(total_tokens > 0, "train: an update of {} batches has no target tokens", batches.size());
  if (graphs_) {  // the same arithmetic, captured once per shape and replayed
    graphs_->begin_update();
    for (const Batch& b : batches)
      graphs_->add_micro_batch(padded_to(b, options_.pad_to), static_cast<double>(b.tgt_tokens) / total_tokens);
    const double value = graphs_->finish_update();
    if (!std::isfinite(value)) diverged("the training loss", step, value);
    return value / total_tokens;
  }
  Tensor loss_sum;  // sum of loss x tokens, float64 where the model is: no wait for the device per micro-batch
  for (const Batch& b : batches) {
    // Each loss is a mean over its own target tokens: weighted by its share of
    // the update's tokens, the summed gradients are those of the mean over all of them.
    const double share = static_cast<double>(b.tgt_tokens) / total_tokens;
    Tensor loss = batch_loss(b);
    const Tensor summed = loss_times_tokens(loss, b.tgt_tokens);
    loss_sum = loss_sum.defined() ? add(loss_sum, summed) : summed;
    if (batches.size() == 1)
      loss.backward();
    else
      mul(loss, scalar_tensor(share, {loss.dtype(), loss.device()})).backward();
  }
  // One wait per update; a non-finite loss stops the run before the optimizer's step.
  const double value = loss_sum.to(kCPU).item<double>();
  if (!std::isfinite(value)) diverged("the training loss", step, value);
  return value / total_tokens;
}

// loss (0-d) x tokens in float64 on the loss's device, outside the graph.
Tensor Trainer::loss_times_tokens(const Tensor& loss, int64_t tokens) {
  NoGradGuard no_grad;
  return mul(to_dtype(loss.detach(), DType::f64),
             scalar_tensor(static_cast<double>(tokens), {DType::f64, loss.device()}));
}

int64_t Trainer::batches_per_update() const {
  return data_parallel() ? options_.accum * comm_->world_size() : options_.accum;
}

void Trainer::zero_grad() {
  for (const Tensor& p : params_) p.set_grad(Tensor());
}

void Trainer::set_flat_gradients(const Tensor& flat) {
  const Tensor on_device = flat.to(options_.device);
  int64_t at = 0;
  for (const Tensor& p : params_) {
    p.set_grad(on_device.narrow(0, at, p.numel()).view(p.shape()));  // disjoint views of one buffer
    at += p.numel();
  }
}

double Trainer::accumulate_data_parallel(const std::vector<Batch>& batches, int64_t step) {
  const int64_t per_rank = options_.accum, global = batches_per_update();
  const auto present = static_cast<int64_t>(batches.size());
  LOOM_CHECK(present >= 1 && present <= global, "train: an update of {} batches, expected 1 to {}", present, global);
  double total_tokens = 0;
  for (const Batch& b : batches) total_tokens += static_cast<double>(b.tgt_tokens);
  LOOM_CHECK(total_tokens > 0, "train: an update of {} batches has no target tokens", batches.size());
  // The tree always spans `global` slots: at an epoch's end the missing micro-batches
  // add zeros, so the shape of the sum, hence its bits, does not depend on who holds what.
  const int64_t first = comm_->rank() * per_rank;
  dist::TreeAccumulator losses(global, {first, first + per_rank});
  Tensor no_loss = zeros({2}, {DType::f64, comm_->device()});
  for (int64_t i = 0; i < per_rank; ++i) {
    const int64_t g = first + i;    // the global micro-batch index
    reducer_->begin_micro_batch();  // the parameters' hooks now send it their gradients
    if (g >= present) {
      reducer_->end_micro_batch();  // zeros: no backward ran
      losses.add(no_loss);
      continue;
    }
    const Batch& b = batches[static_cast<size_t>(g)];
    const uint64_t start = static_cast<uint64_t>((step - 1) * global + g + 1) << kDropoutStrideBits;
    gen_.set_offset(start);
    Tensor loss = batch_loss(b);
    LOOM_CHECK(gen_.offset() - start < (uint64_t{1} << kDropoutStrideBits),
               "train: a micro-batch drew {} dropout offsets, more than the {} kept apart for it",
               gen_.offset() - start, uint64_t{1} << kDropoutStrideBits);
    // Scaled by its share of the global update's target tokens, as in one process.
    const double share = static_cast<double>(b.tgt_tokens) / total_tokens;
    mul(loss, scalar_tensor(share, {loss.dtype(), loss.device()})).backward();
    reducer_->end_micro_batch();
    zero_grad();
    // [loss x tokens, tokens], summed where the communicator works and read after the
    // all-reduce: with nccl, no wait for the device here.
    const Tensor tokens = full({1}, static_cast<double>(b.tgt_tokens), {DType::f64, loss.device()});
    losses.add(cat({loss_times_tokens(loss, b.tgt_tokens).reshape({1}), tokens}, 0).to(comm_->device()));
  }
  // Every rank leaves the dropout stream where the next update starts: the saved state
  // does not depend on which micro-batch ran last here.
  gen_.set_offset(static_cast<uint64_t>(step * global + 1) << kDropoutStrideBits);
  // The last micro-batch's buckets were summed across ranks as its backward went on.
  const auto reduce_start = std::chrono::steady_clock::now();
  set_flat_gradients(reducer_->finish());
  // The reported loss in the tree over all micro-batches whatever --reduce says (two
  // numbers): equal printed losses at any world size.
  std::vector<Tensor> loss_sums = losses.subtree_sums();
  Tensor loss_sum = loss_sums.back();
  comm_->all_reduce_tree(loss_sums, per_rank, loss_sum);
  loss_sum = loss_sum.to(kCPU);
  // The step waited for everything since reduce_start; the loss's all-reduce is communication too.
  reduce_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - reduce_start).count();
  communication_seconds_ = reducer_->communication_seconds() + (reduce_seconds_ - reducer_->exposed_seconds());
  // Every rank sees the same summed loss, so a non-finite one stops them all at this step.
  const double value = loss_sum.data<double>()[0];
  if (!std::isfinite(value)) diverged("the training loss", step, value);
  return value / loss_sum.data<double>()[1];
}

double Trainer::evaluate(const std::vector<Batch>& batches) {
  NoGradGuard no_grad;
  nn::EvalModeGuard eval(*model_);
  double total = 0, tokens = 0;
  for (const Batch& b : batches) {
    total += batch_loss(b).to(kCPU).item<double>() * static_cast<double>(b.tgt_tokens);
    tokens += static_cast<double>(b.tgt_tokens);
  }
  return total / tokens;
}

void Trainer::diverged(const std::string& what, int64_t step, double value) const {
  fail("train: {} is {} at step {} (learning rate {:.3g}); stopped without saving: {}", what, value, step,
       noam_->rate(std::max<int64_t>(step, 1)), last_saved_);
}

void Trainer::check_finite_parameters(const char* when) const {
  for (size_t k = 0; k < params_.size(); ++k)
    if (!all_finite(params_[k]))
      fail("train: parameter '{}' is not finite after step {} ({}); stopped without saving: {}", param_names_[k], step_,
           when, last_saved_);
}

// ---- the loop ----
bool Trainer::any_rank(bool here) {
  if (comm_->world_size() == 1) return here;
  Tensor any = Tensor::empty({1}, {DType::f64, kCPU});
  any.data<double>()[0] = here ? 1 : 0;
  any = any.to(comm_->device());  // the communicator's device: the CPU, or (nccl) this rank's GPU
  comm_->all_reduce_sum(any, dist::Reduce::fast);
  return any.to(kCPU).data<double>()[0] > 0;
}

bool Trainer::stop_requested(const TrainerHooks& hooks) {
  // A signal reaches the ranks at different moments: all stop after the same update.
  return any_rank(hooks.stop && hooks.stop->load());
}

bool Trainer::snapshot_due(int64_t before, int64_t after, int64_t count) const {
  if (after >= count) return false;
  if (options_.keep_every > 0) return step_ % options_.keep_every == 0;
  const int64_t k = options_.keep_per_epoch;
  return k > 1 && after * k / count > before * k / count;  // crossed one of the points j * count / k
}

void Trainer::schedule_cooldown(int64_t batches_in_epoch) {
  // An epoch's updates as the fixed grouping counts them (drawn ones vary).
  const int64_t fixed_count = options_.regroup_batches
                                  ? count_batches(train_->lengths(), fitting(), options_.max_tokens, options_.max_len)
                                  : batches_in_epoch;
  const int64_t updates_per_epoch = (fixed_count + batches_per_update() - 1) / batches_per_update();
  const int64_t end = options_.epochs * updates_per_epoch;
  noam_->set_cooldown(end - std::llround(options_.cooldown_epochs * static_cast<double>(updates_per_epoch)), end);
}

StepReport Trainer::take_step(const std::vector<Batch>& update, const TrainerHooks& hooks) {
  StepReport r{.step = step_ + 1, .epoch = epoch_};
  r.log = r.step % options_.log_every == 0;
  zero_grad();
  r.loss = accumulate_gradients(update, r.step);
  if (!graphs_news_.empty() && hooks.message) hooks.message(graphs_news_);
  graphs_news_.clear();
  if (hooks.gradients_ready) hooks.gradients_ready(r.step);
  if (options_.clip > 0)
    r.grad_norm = optim::clip_grad_norm(params_, options_.clip);
  else if (r.log)
    r.grad_norm = optim::grad_norm(params_);  // a pass over every gradient: only when reported
  r.lr = noam_->step();
  adam_->step();
  const auto share_start = std::chrono::steady_clock::now();
  share_updated_parameters();
  if (data_parallel()) {
    const double share_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - share_start).count();
    r.reduce_seconds = reduce_seconds_ + share_seconds;
    r.communication_seconds = communication_seconds_ + share_seconds;
  }
  ++step_;
  batch_in_epoch_ += static_cast<int64_t>(update.size());
  for (const Batch& b : update) r.src_tokens += b.src_tokens, r.tgt_tokens += b.tgt_tokens;
  window_loss_ += r.loss * static_cast<double>(r.tgt_tokens);
  window_tokens_ += static_cast<double>(r.tgt_tokens);
  if (r.log) {
    r.window_loss = window_loss_ / window_tokens_;
    window_loss_ = window_tokens_ = 0;
  }
  return r;
}

void Trainer::save_if_due(const TrainerHooks& hooks, int64_t update_size, int64_t batches_in_epoch) {
  const bool by_steps = options_.save_every > 0 && step_ % options_.save_every == 0;
  // Each rank's clock: saved when any rank's says so (a sharded save is a collective).
  const bool by_time =
      options_.save_minutes > 0 &&
      any_rank(std::chrono::duration<double>(std::chrono::steady_clock::now() - last_save_time_).count() >=
               options_.save_minutes * 60);
  if ((by_steps || by_time) && batch_in_epoch_ < batches_in_epoch)
    save_checkpoint(hooks, false);  // kept too, when any are
  else if (snapshot_due(batch_in_epoch_ - update_size, batch_in_epoch_, batches_in_epoch))
    keep_snapshot();
}

void Trainer::save_interrupted(const TrainerHooks& hooks) {
  check_finite_parameters("interrupted");
  const Moments moments = optimizer_moments();  // a collective when sharded
  if (is_main_rank()) save_state(moments);
  if (hooks.message)
    hooks.message(fmt::format("interrupted after step {}: saved '{}'; `loom train --resume {}` continues", step_,
                              state_path(out_), out_));
}

std::vector<Batch> Trainer::update_batches(const BatchPlan& plan, int64_t first, int64_t n) const {
  std::vector<Batch> update;
  for (int64_t g = 0; g < n; ++g) {
    const std::span<const uint32_t> group = plan[static_cast<size_t>(first + g)];
    const bool mine = !data_parallel() || g / options_.accum == comm_->rank();  // see accumulate_data_parallel
    update.push_back(mine ? make_batch(*train_, group) : count_tokens(train_->lengths(), group));
  }
  return update;
}

bool Trainer::run(const TrainerHooks& hooks) {
  auto limit_reached = [&] { return options_.max_steps > 0 && step_ >= options_.max_steps; };
  model_->train();
  while (epoch_ <= options_.epochs && !limit_reached()) {
    // The epoch's batches, drawn again from the same offset on resume.
    shuffle_.set_offset(epoch_shuffle_offset_);
    const BatchPlan plan = plan_batches(train_->lengths(), fitting(), options_.max_tokens, options_.max_len, shuffle_,
                                        options_.regroup_batches ? Grouping::drawn : Grouping::fixed);
    const uint64_t next_epoch_offset = shuffle_.offset();
    const int64_t count = static_cast<int64_t>(plan.size());
    if (options_.cooldown_epochs > 0) schedule_cooldown(count);
    while (batch_in_epoch_ < count && !limit_reached()) {
      const int64_t n = std::min(batches_per_update(), count - batch_in_epoch_);
      const StepReport r = take_step(update_batches(plan, batch_in_epoch_, n), hooks);
      if (hooks.step_done) hooks.step_done(r);
      save_if_due(hooks, n, count);
      if (stop_requested(hooks)) {
        save_interrupted(hooks);
        return false;
      }
    }
    if (batch_in_epoch_ < count) break;  // max_steps, mid-epoch
    // The epoch is done: the state saved with its checkpoint starts the next one.
    ++epoch_;
    batch_in_epoch_ = 0;
    epoch_shuffle_offset_ = next_epoch_offset;
    save_checkpoint(hooks, true);
  }
  if (last_checkpoint_step_ != step_) save_checkpoint(hooks, false);
  write_average(hooks);
  return true;
}

}  // namespace loom::models
