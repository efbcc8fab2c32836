#pragma once
// The seam between core and a device: memory, copies, fills and its stream.
// cpu lives in core; cuda/ registers its own Backend at load time, so core never
// depends on CUDA. A device's kernels live in the kernel table (kernel_table.h).
//
// Ordering: each device has one stream. Kernels and the calls below run on it in
// the order they are issued; a copy to the host waits for the work before it, so
// a value read back on the host is always the finished one. synchronize() waits
// for everything issued so far (timing, freeing memory another stream may use).
//
// Random numbers need no device state: a Generator is (seed, offset), every random
// op takes one offset (Generator::next_offset) whatever the device, and element i
// draws Philox block (seed, offset, i): the same bits on every device.
#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "loom/allocator.h"
#include "loom/capture.h"
#include "loom/device.h"

namespace loom {

class Backend {
 public:
  virtual ~Backend() = default;
  virtual Allocator& allocator(int device_index) = 0;
  // Copies bytes between host memory and this device, or within this device
  // (either side may be the host).
  virtual void copy(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes) = 0;
  // Writes `count` copies of the `element_bytes`-byte value at host address
  // `value` to dst (the seed gradient, zero_grad, fill_).
  virtual void fill(void* dst, Device device, const void* value, size_t element_bytes, size_t count) = 0;
  // Waits until every kernel and copy issued on the device's stream has finished.
  virtual void synchronize(int device_index) = 0;
  virtual int device_count() const = 0;
  // Whether host code may read and write this device's memory directly. When
  // not, Storage::data() refuses outside a running kernel (KernelScope).
  virtual bool host_accessible() const = 0;
  // Captures what `work` issues on the device for replay (loom/capture.h), its
  // allocations in the allocator's pool `pool` (0: a new one, whose id it sets); the
  // default: this device cannot.
  virtual std::unique_ptr<CapturedWork> capture(int device_index, const std::function<void()>& work, uint64_t& pool);
};

Backend& backend(DeviceType type);  // throws loom::Error if none is registered
bool has_backend(DeviceType type);
// Where the CUDA layer is a shared library (this tree's build), it is loaded on
// first need, by backend(cuda), has_backend(cuda) or a communicator it provides
// (nccl): a run that never asks for a GPU never maps CUDA's libraries, about 80 ms
// of every process's start and exit. True when the cuda backend is registered; else
// `why`, if given, says what was tried and why it failed ("" where this build has no
// CUDA layer to load).
bool load_cuda_layer(std::string* why = nullptr);
void register_backend(DeviceType type, Backend* backend);  // not owned
Allocator& allocator(Device device);

// A Backend over host memory (cpu, and the stand-in device's memory): memcpy,
// fills by loop, nothing to wait for.
class HostBackend : public Backend {
 public:
  void copy(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes) override;
  void fill(void* dst, Device device, const void* value, size_t element_bytes, size_t count) override;
  void synchronize(int) override {}
  int device_count() const override { return 1; }
};

}  // namespace loom
