#include "loom/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "loom/error.h"

namespace loom {

MappedFile::MappedFile(std::string path) : path_(std::move(path)) {
  const int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  LOOM_CHECK(fd >= 0, "cannot open '{}': {}", path_, std::strerror(errno));
  struct stat info {};
  if (::fstat(fd, &info) != 0) {
    const int error = errno;
    ::close(fd);
    fail("cannot read '{}': {}", path_, std::strerror(error));
  }
  size_ = static_cast<size_t>(info.st_size);
  if (size_ > 0) {
    void* at = ::mmap(nullptr, size_, PROT_READ, MAP_SHARED, fd, 0);
    const int error = errno;
    ::close(fd);  // the mapping keeps the file
    LOOM_CHECK(at != MAP_FAILED, "cannot map '{}' ({} bytes): {}", path_, size_, std::strerror(error));
    data_ = static_cast<const std::byte*>(at);
  } else {
    ::close(fd);
  }
}

MappedFile::~MappedFile() {
  if (data_) ::munmap(const_cast<std::byte*>(data_), size_);
}

void MappedFile::expect_random_access() const {
  if (data_) ::madvise(const_cast<std::byte*>(data_), size_, MADV_RANDOM);
}

}  // namespace loom
