#pragma once
// Shared by the libFuzzer targets: the loaders read paths, so an input is
// handed over as a file. An in-memory one (memfd), rewritten per input: no disk.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace loom::fuzz {

inline std::string input_file(const uint8_t* data, size_t size) {
  static const int fd = ::memfd_create("loom_fuzz_input", 0);
  if (fd < 0 || ::ftruncate(fd, 0) != 0 || (size && ::pwrite(fd, data, size, 0) != static_cast<ssize_t>(size)))
    __builtin_trap();  // the harness itself failed
  return "/proc/self/fd/" + std::to_string(fd);
}

}  // namespace loom::fuzz
