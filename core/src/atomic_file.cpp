#include "loom/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <mutex>
#include <set>

#include "loom/error.h"

namespace loom {

namespace {

// fsync through a descriptor of its own: std::ofstream does not expose one.
// Folders on some file systems refuse fsync (EINVAL): nothing to make durable then.
int sync_path(const std::string& path, int flags) {
  const int fd = ::open(path.c_str(), flags | O_CLOEXEC);
  if (fd < 0) return errno;
  const int result = ::fsync(fd) == 0 || errno == EINVAL ? 0 : errno;
  ::close(fd);
  return result;
}

// Where writing `path` lands: a symbolic link is written through, to the file it
// points at (the link stays a link), as `>` in a shell does.
std::string write_target(const std::string& path) {
  namespace fs = std::filesystem;
  fs::path at = path;
  std::error_code ec;
  for (int hops = 0; hops < 40 && fs::is_symlink(at, ec); ++hops) {  // a link to a link, not yet a file
    const fs::path target = fs::read_symlink(at, ec);
    if (ec) break;
    at = target.is_absolute() ? target : at.parent_path() / target;
  }
  return at.string();
}

// The temporaries of living AtomicFiles, for remove_live_temporaries.
std::mutex live_mutex;
std::set<std::string> live_temporaries;

}  // namespace

std::string temporary_path(const std::string& path) { return path + ".tmp." + std::to_string(::getpid()); }

void commit_file(const std::string& temporary, const std::string& path) {
  auto give_up = [&](int error, const char* what) {
    std::remove(temporary.c_str());
    fail("cannot write '{}': {} '{}' failed: {}", path, what, temporary, std::strerror(error));
  };
  if (int error = sync_path(temporary, O_RDONLY)) give_up(error, "syncing");
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    std::remove(temporary.c_str());
    fail("cannot write '{}': it is a folder", path);
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) give_up(errno, "renaming");
  std::string folder = std::filesystem::path(path).parent_path().string();
  if (int error = sync_path(folder.empty() ? "." : folder, O_RDONLY | O_DIRECTORY))
    fail("wrote '{}', but syncing its folder failed: {}", path, std::strerror(error));
}

void commit_folder(const std::string& temporary, const std::string& path) {
  namespace fs = std::filesystem;
  auto give_up = [&](const std::string& why) {
    std::error_code ignored;
    fs::remove_all(temporary, ignored);
    fail("cannot write '{}': {}", path, why);
  };
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(temporary, ec))
    if (int error = sync_path(entry.path().string(), O_RDONLY))
      give_up(fmt::format("syncing '{}' failed: {}", entry.path().string(), std::strerror(error)));
  if (ec) give_up(fmt::format("cannot list '{}': {}", temporary, ec.message()));
  if (int error = sync_path(temporary, O_RDONLY | O_DIRECTORY))
    give_up(fmt::format("syncing '{}' failed: {}", temporary, std::strerror(error)));
  if (fs::exists(path, ec)) give_up("it exists (remove it, or write elsewhere)");
  if (std::rename(temporary.c_str(), path.c_str()) != 0)
    give_up(fmt::format("renaming '{}' failed: {}", temporary, std::strerror(errno)));
  std::string folder = fs::path(path).parent_path().string();
  if (int error = sync_path(folder.empty() ? "." : folder, O_RDONLY | O_DIRECTORY))
    fail("wrote '{}', but syncing its folder failed: {}", path, std::strerror(error));
}

AtomicFile::AtomicFile(std::string path) : path_(write_target(path)), temporary_(temporary_path(path_)) {
  {
    std::lock_guard lock(live_mutex);  // created and listed together
    out_.open(temporary_, std::ios::binary | std::ios::trunc);
    if (out_.good()) live_temporaries.insert(temporary_);
  }
  LOOM_CHECK(out_.good(), "cannot write '{}': cannot create '{}': {}", path_, temporary_, std::strerror(errno));
}

AtomicFile::~AtomicFile() {
  if (!committed_) {
    out_.close();
    std::remove(temporary_.c_str());
  }
  std::lock_guard lock(live_mutex);
  live_temporaries.erase(temporary_);
}

void AtomicFile::commit() {
  out_.flush();
  const int error = errno;  // what the failed write (if any) set: ENOSPC, EFBIG, EIO
  out_.close();
  if (out_.fail()) {
    std::remove(temporary_.c_str());
    committed_ = true;  // nothing left to clean up
    fail("cannot write '{}': writing '{}' failed (disk full?): {}", path_, temporary_, std::strerror(error));
  }
  committed_ = true;
  commit_file(temporary_, path_);
}

void remove_live_temporaries() {
  live_mutex.lock();  // held until the process ends: no temporary is made after this
  for (const auto& temporary : live_temporaries) std::remove(temporary.c_str());
  live_temporaries.clear();
}

void write_file(const std::string& path, const std::string& contents) {
  AtomicFile file(path);
  file.stream() << contents;
  file.commit();
}

std::vector<std::string> remove_dead_temporaries(const std::string& folder, const std::string& target) {
  namespace fs = std::filesystem;
  std::vector<std::string> removed;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(folder, ec)) {
    const std::string name = entry.path().filename().string();
    const size_t mark = name.rfind(".tmp.");
    if (mark == std::string::npos || mark == 0) continue;
    if (!target.empty() && (mark != target.size() || name.compare(0, mark, target) != 0)) continue;
    const std::string digits = name.substr(mark + 5);
    if (digits.empty() || digits.size() > 9 || digits.find_first_not_of("0123456789") != std::string::npos) continue;
    const pid_t pid = static_cast<pid_t>(std::stol(digits));
    const bool writer_alive = pid == ::getpid() || ::kill(pid, 0) == 0 || errno == EPERM;
    if (!writer_alive && fs::remove_all(entry.path(), ec) > 0) removed.push_back(name);
  }
  return removed;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  LOOM_CHECK(in.good(), "cannot open '{}': {}", path, std::strerror(errno));
  std::string bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  LOOM_CHECK(!in.bad(), "cannot read '{}': {}", path, std::strerror(errno));
  return bytes;
}

void copy_file(const std::string& from, const std::string& to) { write_file(to, read_file(from)); }

}  // namespace loom
