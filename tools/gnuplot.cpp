#include "gnuplot.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "loom/atomic_file.h"
#include "loom/error.h"
#include "stop_signals.h"

namespace loom::tools {

std::string gnuplot_quote(const std::string& text) {
  std::string quoted = "'";
  for (char c : text) quoted += c == '\'' ? std::string("''") : std::string(1, c);
  return quoted + "'";
}

std::string picture_format(const std::string& path, const std::string& flag) {
  const std::string ext = std::filesystem::path(path).extension().string();
  LOOM_CHECK(ext == ".png" || ext == ".svg", "{} '{}': the picture's name must end in .png or .svg", flag, path);
  return ext.substr(1);
}

GnuplotFigure::GnuplotFigure(std::string path, int width, int height, const std::string& flag)
    : path_(std::move(path)) {
  // noenhanced: subword tokens hold '_', '^' and '{', which enhanced text would format.
  terminal_ = picture_format(path_, flag) == "png"
                  ? fmt::format("set terminal pngcairo size {},{} font 'DejaVu Sans,9' noenhanced", width, height)
                  : fmt::format("set terminal svg size {},{} font 'DejaVu Sans,9' noenhanced", width, height);
}

void GnuplotFigure::add_data(const std::string& name, const std::string& rows) {
  data_ << "$" << name << " << EOD\n" << rows << (rows.empty() || rows.back() == '\n' ? "" : "\n") << "EOD\n";
}

namespace {

// Runs `gnuplot script`, its messages to `log`; the exit status, or an error when it cannot start.
int run_gnuplot(const std::string& script, const std::string& log) {
  const pid_t pid = ::fork();
  LOOM_CHECK(pid >= 0, "plot: cannot start gnuplot: {}", std::strerror(errno));
  if (pid == 0) {
    unblock_stop_signals_in_child();  // Ctrl-C reaches gnuplot as it would without loom
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      ::dup2(fd, STDOUT_FILENO);
      ::dup2(fd, STDERR_FILENO);
    }
    ::execlp("gnuplot", "gnuplot", script.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);  // not installed
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::string read_all(const std::string& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace

void GnuplotFigure::render() {
  const std::string temporary = temporary_path(path_) + "." + picture_format(path_, "--out");
  const std::string script_path = temporary_path(path_) + ".gp", log_path = temporary_path(path_) + ".log";
  {
    std::ofstream script(script_path);
    script << terminal_ << "\nset output " << gnuplot_quote(temporary) << "\n"
           << data_.str() << script_.str() << "\nunset output\n";
    LOOM_CHECK(script.good(), "plot: cannot write the gnuplot script '{}'", script_path);
  }
  const int status = run_gnuplot(script_path, log_path);
  std::string messages = read_all(log_path);
  std::filesystem::remove(log_path);
  std::filesystem::remove(script_path);
  if (status != 0 || !std::filesystem::exists(temporary) || std::filesystem::file_size(temporary) == 0) {
    std::filesystem::remove(temporary);
    LOOM_CHECK(status != 127, "plot: gnuplot is not installed (scripts/setup installs gnuplot-nox); '{}' not written",
               path_);
    while (!messages.empty() && (messages.back() == '\n' || messages.back() == ' ')) messages.pop_back();
    fail("plot: gnuplot failed (exit {}) drawing '{}': {}", status, path_, messages);
  }
  commit_file(temporary, path_);
}

}  // namespace loom::tools
