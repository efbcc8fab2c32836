#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

#include "loom/device.h"

namespace loom {

// A block of device memory shared by a tensor and all its views.
class Storage {
 public:
  Storage(size_t nbytes, Device device);
  // Memory another library owns (a NumPy array, a DLPack tensor), shared, not
  // copied: loom reads and writes it in place, and calls `release` instead of
  // freeing it when the last tensor viewing it goes.
  static std::shared_ptr<Storage> borrow(void* data, size_t nbytes, Device device, std::function<void()> release);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  // The memory, for kernels. On a device whose memory the host may not touch
  // (Backend::host_accessible), only inside a running kernel (KernelScope).
  void* data() const {
    if (!host_accessible_) check_kernel_access();
    return data_;
  }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }
  // Bumped by every in-place write, so autograd can tell a saved tensor was modified.
  uint64_t version() const { return version_; }
  void bump_version() { ++version_; }

 private:
  void* data_ = nullptr;
  size_t nbytes_ = 0;
  Device device_;
  uint64_t version_ = 0;
  bool host_accessible_ = true;
  std::function<void()> release_;  // set for borrowed memory

  Storage(void* data, size_t nbytes, Device device, std::function<void()> release);

  void check_kernel_access() const;
};

}  // namespace loom
