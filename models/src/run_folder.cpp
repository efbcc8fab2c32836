#include "loom/models/run_folder.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <fmt/chrono.h>
#include <fmt/core.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <regex>

#include "loom/atomic_file.h"
#include "loom/error.h"
#include "loom/nn.h"

namespace loom::models {

namespace fs = std::filesystem;

namespace {

// "pid 1234 on host, `loom train`, since 2026-11-25 22:40:01": what the lock file holds.
std::string holder_text(const std::string& command) {
  char host[256] = "?";
  ::gethostname(host, sizeof(host) - 1);
  return fmt::format("pid {} on {}, `{}`, since {:%Y-%m-%d %H:%M:%S}", ::getpid(), host, command,
                     fmt::localtime(std::chrono::system_clock::to_time_t(std::chrono::system_clock::now())));
}

std::string read_fd(int fd) {
  std::string text(512, '\0');
  const ssize_t n = ::pread(fd, text.data(), text.size(), 0);
  text.resize(n > 0 ? static_cast<size_t>(n) : 0);
  while (!text.empty() && (text.back() == '\n' || text.back() == '\0')) text.pop_back();
  return text.empty() ? "a process that has not yet written its name" : text;
}

}  // namespace

RunFolderLock::RunFolderLock(const std::string& folder, const std::string& command) {
  const std::string path = (fs::path(folder) / ".lock").string();
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  LOOM_CHECK(fd_ >= 0, "{}: cannot open the run folder's lock '{}': {}", command, path, std::strerror(errno));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    const std::string holder = read_fd(fd_);
    ::close(fd_);
    fd_ = -1;
    LOOM_CHECK(error != EWOULDBLOCK,
               "{}: the run folder '{}' is in use by another loom ({}): wait for it to end, "
               "or give another folder",
               command, folder, holder);
    fail("{}: cannot lock the run folder '{}' ({}): {}", command, folder, path, std::strerror(error));
  }
  const std::string text = holder_text(command) + "\n";
  if (::ftruncate(fd_, 0) == 0) {
    [[maybe_unused]] const ssize_t written = ::pwrite(fd_, text.data(), text.size(), 0);
  }
}

RunFolderLock::~RunFolderLock() {
  if (fd_ >= 0) ::close(fd_);  // releases the lock; the file stays (removing it would race a waiting locker)
}

std::vector<std::pair<int64_t, fs::path>> kept_checkpoints(const std::string& folder) {
  static const std::regex pattern(R"(step-(\d{8,})\.safetensors)");
  std::vector<std::pair<int64_t, fs::path>> found;
  for (const auto& entry : fs::directory_iterator(folder)) {
    std::smatch m;
    const std::string name = entry.path().filename().string();
    if (entry.is_regular_file() && std::regex_match(name, m, pattern))
      found.emplace_back(std::stoll(m[1]), entry.path());
  }
  std::sort(found.begin(), found.end());
  return found;
}

std::vector<std::pair<int64_t, fs::path>> validated_checkpoints(const std::string& folder) {
  std::vector<std::pair<int64_t, fs::path>> validated;
  for (auto& kept : kept_checkpoints(folder))
    if (nn::load_safetensors_metadata(kept.second.string()).count("val_loss")) validated.push_back(std::move(kept));
  return validated;
}

std::vector<std::string> run_files(const std::string& folder) {
  std::vector<std::string> found;
  std::error_code ec;
  for (const char* name : {"model.safetensors", "training_state.safetensors", "best", "average"})
    if (fs::exists(fs::path(folder) / name, ec)) found.push_back(name);
  for (const auto& [step, path] : kept_checkpoints(folder)) found.push_back(path.filename().string());
  return found;
}

std::vector<std::string> remove_stale_temporaries(const std::string& folder) {
  std::vector<std::string> removed;
  for (const char* sub : {"", "best", "average"})
    for (const std::string& name : remove_dead_temporaries((fs::path(folder) / sub).string()))
      removed.push_back((fs::path(sub) / name).string());
  return removed;
}

}  // namespace loom::models
