#pragma once
// What `loom train` shows while it runs: a progress bar with ETA on a terminal,
// a plain line every --log-every steps, and <out>/metrics.jsonl, one JSON object a line:
//   {"type":"run", ...}                       once, when a run starts
//   {"type":"train","step":..,"epoch":..,"loss":..,"lr":..,"grad_norm":..,
//    "layers":{"encoder.layers.0":{"grad_norm":..,"update_ratio":..},...},
//    "tokens_per_s":..,"peak_tensor_bytes":..,"cached_tensor_bytes":..,"rss_bytes":..,"peak_rss_bytes":..,"time_s":..}
//                                             every --log-every steps
//   {"type":"val","step":..,"epoch":..,"val_loss":..,"val_ppl":..[,"bleu":..]}   after each epoch
// "loss" is the mean per target token since the previous line; the gradient
// norms are optim::grad_norm's (the global one over all parameters, each layer's
// over its own), taken before the optimizer's step; "update_ratio" is
// |w_after - w_before| / |w_before| for that step. Per-layer numbers cost a pass
// over the weights, so they are taken on logged steps only.
//
// Durability: a new run replaces the file atomically (loom/atomic_file.h) with
// its "run" line; later lines are appended, each by one write(2), and the file
// is fsynced after each validation line (with the checkpoint). A crash can leave
// a last line cut short; read_metrics() skips a line that is not JSON (and says
// so), and an appended run (resume) first ends such a line.
#include <chrono>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "loom/models/trainer.h"
#include "loom/nn.h"
#include "progress.h"

namespace loom::tools {

struct MonitorOptions {
  std::string out;                                     // the run folder
  ProgressMode progress = ProgressMode::automatic;     // the bar, and (unless off) a line every log_every steps
  int64_t log_every = 100;                             // steps between lines
  int64_t total_steps = 0;                             // for the bar and ETA (0: unknown)
  bool append = false;                                 // a resumed run: keep the file's earlier lines
  nlohmann::json run_info = nlohmann::json::object();  // added to the "run" line (preset, seed...)
};

class TrainingMonitor {
 public:
  TrainingMonitor(const nn::Module& model, MonitorOptions options);
  ~TrainingMonitor();

  // Whether step (counted from 1) writes a line; its gradients are then wanted.
  bool is_log_step(int64_t step) const { return step % options_.log_every == 0; }
  // After backward, before the optimizer's step, on a log step: the global
  // gradient norm (returned) and each layer's; keeps the weights to measure the update.
  double capture_gradients();
  // After the optimizer's step: advances the bar (with this step's loss); on a log
  // step prints and writes the line with window_loss, the trainer's mean per target
  // token since the last log step (kept across a resume, so the lines match), and
  // the window's mean time per step waiting for the cross-rank reduction (reduce_ms)
  // and spent in it, overlapped with backward or not (comm_ms).
  void step_done(const models::StepReport& r);
  void validation(int64_t step, int64_t epoch, double val_loss, std::optional<double> bleu = {});
  // A line of text (epoch summaries...), printed above the bar.
  void print(const std::string& line) { bar_.print(line); }

  const std::string& path() const { return path_; }

 private:
  struct Layer {
    std::string name;
    std::vector<Tensor> params;
    std::vector<Tensor> before;  // the weights before the step (log steps only)
    double grad_norm = 0;
  };
  void append(const nlohmann::json& record, bool sync = false);

  MonitorOptions options_;
  std::string path_;
  int fd_ = -1;
  std::vector<Tensor> params_;
  std::vector<Layer> layers_;
  double global_norm_ = 0;
  bool captured_ = false;
  double window_tokens_ = 0, window_reduce_seconds_ = 0, window_communication_seconds_ = 0;
  int64_t window_steps_ = 0;
  std::chrono::steady_clock::time_point start_, window_start_, last_step_end_;
  ProgressBar bar_;
};

// The layer a parameter belongs to, from its name: up to the layer's index
// ("encoder.layers.0.self_attn.w_q.weight" -> "encoder.layers.0"), else its
// module ("src_embed.weight" -> "src_embed", "encoder.norm.bias" -> "encoder.norm").
std::string layer_of(const std::string& parameter_name);

// The records of a metrics.jsonl, in order. A line that is not a JSON object
// (a crash mid-write) is skipped and counted in `skipped`; when the steps of
// "train" records go back (a run resumed from an earlier checkpoint), the
// records after the resumed step are dropped, as the run did.
std::vector<nlohmann::json> read_metrics(const std::string& path, int64_t* skipped = nullptr);

}  // namespace loom::tools
