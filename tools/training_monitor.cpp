#include "training_monitor.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <ctime>
#include <fstream>
#include <map>

#include "loom/backend.h"
#include "loom/atomic_file.h"
#include "loom/ops.h"
#include "loom/optim.h"

namespace loom::tools {

std::string layer_of(const std::string& parameter_name) {
  std::vector<std::string> parts;
  for (size_t start = 0;;) {
    const size_t dot = parameter_name.find('.', start);
    parts.push_back(parameter_name.substr(start, dot - start));
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  std::string layer;
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    layer += (i ? "." : "") + parts[i];
    if (!parts[i].empty() && std::all_of(parts[i].begin(), parts[i].end(), ::isdigit)) return layer;
  }
  return parts.size() == 1 ? parts[0] : layer;
}

namespace {

// VmRSS and VmHWM of this process in bytes (Linux), 0 where unknown.
std::pair<int64_t, int64_t> resident_bytes() {
  std::ifstream status("/proc/self/status");
  int64_t rss = 0, peak = 0;
  for (std::string line; std::getline(status, line);) {
    auto kib = [&](const char* key) { return std::stoll(line.substr(std::strlen(key))) * 1024; };
    if (line.rfind("VmRSS:", 0) == 0) rss = kib("VmRSS:");
    if (line.rfind("VmHWM:", 0) == 0) peak = kib("VmHWM:");
  }
  return {rss, peak};
}

std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  return text;
}

// Sum of squares of a - b (b undefined: of a), in float64: one number back.
double squared_distance(const Tensor& a, const Tensor& b) {
  Tensor d = to_dtype(a.detach(), DType::f64);
  if (b.defined()) d = sub(d, to_dtype(b, DType::f64));
  return sum(mul(d, d)).to(kCPU).item<double>();
}

// JSON has no NaN or infinity: such a number is written as null (the reader sees a gap).
nlohmann::json number(double value) { return std::isfinite(value) ? nlohmann::json(value) : nlohmann::json(); }

}  // namespace

TrainingMonitor::TrainingMonitor(const nn::Module& model, MonitorOptions options)
    : options_(std::move(options)),
      path_(options_.out + "/metrics.jsonl"),
      start_(std::chrono::steady_clock::now()),
      window_start_(start_),
      bar_(options_.total_steps, stdout, options_.progress) {
  std::map<std::string, size_t> index;
  for (const auto& [name, param] : model.named_parameters()) {
    params_.push_back(param);
    const std::string layer = layer_of(name);
    auto [it, added] = index.emplace(layer, layers_.size());
    if (added) layers_.push_back({layer, {}, {}, 0});
    layers_[it->second].params.push_back(param);
  }
  nlohmann::json run = {{"type", "run"},
                        {"started", utc_now()},
                        {"log_every", options_.log_every},
                        {"total_steps", options_.total_steps},
                        {"parameters", model.parameter_count()}};
  run.update(options_.run_info);
  if (!options_.append) write_file(path_, "");  // a new run replaces the old file, atomically
  fd_ = ::open(path_.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  LOOM_CHECK(fd_ >= 0, "train: cannot open the metrics file '{}': {}", path_, std::strerror(errno));
  // A crash may have cut the last line: end it, so that it stays one bad line and the next is whole.
  if (const off_t size = ::lseek(fd_, 0, SEEK_END); size > 0) {
    char last = '\n';
    std::ifstream in(path_, std::ios::binary);
    in.seekg(size - 1);
    in.get(last);
    if (last != '\n' && ::write(fd_, "\n", 1) != 1) fail("train: cannot write the metrics file '{}'", path_);
  }
  append(run, true);
}

TrainingMonitor::~TrainingMonitor() {
  if (fd_ >= 0) {
    ::fsync(fd_);
    ::close(fd_);
  }
}

void TrainingMonitor::append(const nlohmann::json& record, bool sync) {
  const std::string line = record.dump() + "\n";
  // One write per line: a line is never interleaved, and a crash cuts at most the last one.
  const ssize_t written = ::write(fd_, line.data(), line.size());
  LOOM_CHECK(written == static_cast<ssize_t>(line.size()), "train: cannot write the metrics file '{}': {}", path_,
             written < 0 ? std::strerror(errno) : "short write (disk full?)");
  if (sync) LOOM_CHECK(::fsync(fd_) == 0, "train: cannot sync the metrics file '{}': {}", path_, std::strerror(errno));
}

double TrainingMonitor::capture_gradients() {
  NoGradGuard no_grad;
  global_norm_ = optim::grad_norm(params_);
  for (Layer& layer : layers_) {
    layer.grad_norm = optim::grad_norm(layer.params);
    layer.before.clear();
    for (const Tensor& p : layer.params) layer.before.push_back(p.detach().clone());
  }
  captured_ = true;
  return global_norm_;
}

void TrainingMonitor::step_done(const models::StepReport& r) {
  const int64_t step = r.step, epoch = r.epoch;
  const double loss = r.loss, window_loss = r.window_loss, lr = r.lr;
  window_tokens_ += static_cast<double>(r.tgt_tokens);
  window_reduce_seconds_ += r.reduce_seconds;
  window_communication_seconds_ += r.communication_seconds;
  ++window_steps_;
  const auto now = last_step_end_ = std::chrono::steady_clock::now();
  bar_.update(step, fmt::format("epoch {}  loss {:.4f}  lr {:.2e}", epoch, loss, lr));
  if (!is_log_step(step)) return;
  NoGradGuard no_grad;
  const double seconds = std::chrono::duration<double>(now - window_start_).count();
  const double mean_loss = window_loss, tokens_per_s = window_tokens_ / seconds;
  const AllocatorStats memory = allocator(kCPU).stats();
  const auto [rss, peak_rss] = resident_bytes();
  nlohmann::json layers = nlohmann::json::object();
  for (Layer& layer : layers_) {
    nlohmann::json entry = {{"grad_norm", captured_ ? number(layer.grad_norm) : nlohmann::json()}};
    if (captured_) {
      double moved = 0, size = 0;
      for (size_t i = 0; i < layer.params.size(); ++i) {
        moved += squared_distance(layer.params[i], layer.before[i]);
        size += squared_distance(layer.before[i], Tensor());
      }
      entry["update_ratio"] = number(size > 0 ? std::sqrt(moved / size) : 0.0);
      layer.before.clear();
    }
    layers[layer.name] = entry;
  }
  append({{"type", "train"},
          {"step", step},
          {"epoch", epoch},
          {"loss", number(mean_loss)},
          {"lr", lr},
          {"grad_norm", captured_ ? number(global_norm_) : nlohmann::json()},
          {"layers", layers},
          {"tokens_per_s", number(tokens_per_s)},
          {"reduce_ms", number(1e3 * window_reduce_seconds_ / static_cast<double>(window_steps_))},
          {"comm_ms", number(1e3 * window_communication_seconds_ / static_cast<double>(window_steps_))},
          {"peak_tensor_bytes", memory.peak_bytes_in_use},
          {"cached_tensor_bytes", memory.bytes_cached},
          {"rss_bytes", rss},
          {"peak_rss_bytes", peak_rss},
          {"time_s", std::chrono::duration<double>(now - start_).count()}});
  if (options_.progress != ProgressMode::off)
    bar_.print(
        fmt::format("step {:6d}  epoch {:3d}  loss {:.4f}  lr {:.2e}  grad-norm {:.3f}  {:.0f} target tokens/s  "
                    "memory: peak {:.0f} MiB, cached {:.0f} MiB, RSS {:.0f} MiB",
                    step, epoch, mean_loss, lr, global_norm_, tokens_per_s, memory.peak_bytes_in_use / 1048576.0,
                    memory.bytes_cached / 1048576.0, rss / 1048576.0));
  captured_ = false;
  window_tokens_ = window_reduce_seconds_ = window_communication_seconds_ = 0;
  window_steps_ = 0;
  window_start_ = std::chrono::steady_clock::now();  // the line's own cost is not the next window's
}

void TrainingMonitor::validation(int64_t step, int64_t epoch, double val_loss, std::optional<double> bleu) {
  nlohmann::json record = {{"type", "val"},
                           {"step", step},
                           {"epoch", epoch},
                           {"val_loss", number(val_loss)},
                           {"val_ppl", number(std::exp(val_loss))}};
  if (bleu) record["bleu"] = number(*bleu);
  append(record, true);
  // Validation and saving are not training: the tokens/s window skips them.
  window_start_ += std::chrono::steady_clock::now() - last_step_end_;
}

std::vector<nlohmann::json> read_metrics(const std::string& path, int64_t* skipped) {
  std::ifstream in(path);
  LOOM_CHECK(in.good(), "plot: cannot read the metrics file '{}'", path);
  std::vector<nlohmann::json> records;
  int64_t bad = 0, last_train_step = -1;
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    nlohmann::json record = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!record.is_object() || !record.contains("type") || !record["type"].is_string()) {
      ++bad;
      continue;
    }
    if (record.contains("step") && record["step"].is_number_integer()) {
      const int64_t step = record["step"].get<int64_t>();
      // A resumed run repeats steps: what came after its checkpoint did not happen.
      if (record["type"] == "train" && step <= last_train_step)
        std::erase_if(records, [&](const nlohmann::json& r) {
          return r.contains("step") && r["step"].is_number_integer() && r["step"].get<int64_t>() >= step &&
                 (r["type"] == "train" || r["step"].get<int64_t>() > step);
        });
      if (record["type"] == "train") last_train_step = step;
    }
    records.push_back(std::move(record));
  }
  if (skipped) *skipped = bad;
  return records;
}

}  // namespace loom::tools
