#pragma once
// A progress bar with ETA for long loops (Debian packages no C++ progress-bar
// library; this is the small one). On a terminal it redraws one line in place
// (at most 10 times a second); elsewhere (a log file, a pipe) it draws nothing
// and only the lines given to print() appear, so logs stay plain text.
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

namespace loom::tools {

// How progress shows (--progress): auto (a bar on a terminal, plain lines elsewhere and
// under a launcher), a bar, plain lines, or off (no bar and no periodic lines; the
// other messages still print).
enum class ProgressMode { automatic, bar, lines, off };
inline constexpr std::array<std::string_view, 4> kProgressModeNames = {"auto", "bar", "lines", "off"};
ProgressMode progress_mode(std::string_view name);  // one of kProgressModeNames
// Whether this process is a rank started by a launcher (Open MPI, PMI/PMIx, Slurm): they
// give ranks a pseudo-terminal even when the job's output goes to a log file.
bool under_launcher();

class ProgressBar {
 public:
  // total: the number of units the loop will do (0: unknown, no bar or ETA).
  ProgressBar(int64_t total, std::FILE* stream = stdout, ProgressMode mode = ProgressMode::automatic);
  ProgressBar(int64_t total, std::FILE* stream, bool terminal);  // terminal forced (tests)
  ~ProgressBar() { finish(); }

  // `done` units so far; `status` is shown after the bar (loss, rate...).
  void update(int64_t done, const std::string& status = "");
  // A whole line above the bar (the bar is redrawn below it).
  void print(const std::string& line);
  void finish();  // leaves the last bar on screen and ends its line

  bool terminal() const { return terminal_; }
  // "1h02m", "3m05s", "12s": the estimated time left after `done` of `total` in `elapsed` seconds.
  static std::string eta(int64_t done, int64_t total, double elapsed_seconds);

 private:
  void draw();
  std::FILE* stream_;
  bool terminal_, drawn_ = false;
  int64_t total_, done_ = 0;
  std::string status_;
  std::chrono::steady_clock::time_point start_, last_draw_;
};

}  // namespace loom::tools
