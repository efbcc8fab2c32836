#include "progress.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include <fmt/core.h>

namespace loom::tools {

ProgressMode progress_mode(std::string_view name) {
  for (size_t i = 0; i < kProgressModeNames.size(); ++i)
    if (kProgressModeNames[i] == name) return static_cast<ProgressMode>(i);
  return ProgressMode::automatic;  // CLI11 has checked the name
}

bool under_launcher() {
  for (const char* variable : {"OMPI_COMM_WORLD_SIZE", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID"})
    if (std::getenv(variable) != nullptr) return true;
  return false;
}

ProgressBar::ProgressBar(int64_t total, std::FILE* stream, ProgressMode mode)
    : ProgressBar(total, stream,
                  mode == ProgressMode::bar ||
                      (mode == ProgressMode::automatic && ::isatty(::fileno(stream)) && !under_launcher())) {}

ProgressBar::ProgressBar(int64_t total, std::FILE* stream, bool terminal)
    : stream_(stream), terminal_(terminal), total_(total), start_(std::chrono::steady_clock::now()) {}

std::string ProgressBar::eta(int64_t done, int64_t total, double elapsed_seconds) {
  if (done <= 0 || total <= 0 || done > total) return "?";
  const auto left = static_cast<int64_t>(
      std::llround(elapsed_seconds / static_cast<double>(done) * static_cast<double>(total - done)));
  if (left >= 3600) return fmt::format("{}h{:02d}m", left / 3600, left % 3600 / 60);
  if (left >= 60) return fmt::format("{}m{:02d}s", left / 60, left % 60);
  return fmt::format("{}s", left);
}

void ProgressBar::update(int64_t done, const std::string& status) {
  done_ = done;
  if (!status.empty()) status_ = status;
  if (!terminal_) return;
  const auto now = std::chrono::steady_clock::now();
  if (drawn_ && now - last_draw_ < std::chrono::milliseconds(100) && done_ != total_) return;
  last_draw_ = now;
  draw();
}

void ProgressBar::draw() {
  constexpr int kWidth = 30;
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  std::string line;
  if (total_ > 0) {
    const double fraction = std::clamp(static_cast<double>(done_) / static_cast<double>(total_), 0.0, 1.0);
    const int filled = static_cast<int>(fraction * kWidth);
    line = fmt::format("[{}{}] {:3.0f}% {}/{}  ETA {}", std::string(filled, '#'), std::string(kWidth - filled, '.'),
                       100 * fraction, done_, total_, eta(done_, total_, elapsed));
  } else {
    line = fmt::format("{} done", done_);
  }
  if (!status_.empty()) line += "  " + status_;
  fmt::print(stream_, "\r\033[2K{}", line);  // \033[2K: erase the old line (it may have been longer)
  std::fflush(stream_);
  drawn_ = true;
}

void ProgressBar::print(const std::string& line) {
  if (terminal_ && drawn_) fmt::print(stream_, "\r\033[2K");
  fmt::print(stream_, "{}\n", line);
  if (terminal_ && drawn_) draw();
  std::fflush(stream_);
}

void ProgressBar::finish() {
  if (terminal_ && drawn_) {
    draw();
    fmt::print(stream_, "\n");
    std::fflush(stream_);
    drawn_ = false;
  }
}

}  // namespace loom::tools
