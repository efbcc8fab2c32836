#include "loom/standin.h"

#include "loom/backend.h"
#include "loom/capture.h"
#include "loom/error.h"
#include "loom/kernel_table.h"

namespace loom {

namespace {
// The stand-in's capture (loom/capture.h) checks that work could be captured on a GPU:
// it runs it with its allocations in a private pool, refusing every copy between the
// host and the stand-in (a GPU's capture would fail there, or replay a stale value).
// It cannot replay: its kernels ran as they were issued, and there is nothing to relaunch.
class CheckedCapture final : public CapturedWork {
 public:
  CheckedCapture(Allocator& allocator, uint64_t pool) : allocator_(allocator), pool_(pool) {}
  ~CheckedCapture() override { allocator_.release_pool(pool_); }
  void replay(uint64_t) override {
    fail("capture: the stand-in device checks that work can be captured; it does not replay it (a GPU does)");
  }
  size_t operations() const override { return 0; }

 private:
  Allocator& allocator_;
  uint64_t pool_;
};

class StandinBackend final : public HostBackend {
 public:
  Allocator& allocator(int) override { return allocator_; }
  bool host_accessible() const override { return false; }

  void copy(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes) override {
    const Device standin = Device::standin(0);
    LOOM_CHECK(!capturing(standin) || (dst_device == standin && src_device == standin),
               "capture: a copy of {} bytes from {} to {} while capturing work on {}: a captured step may not "
               "read from or write to the host (a GPU's capture fails there, or replays a stale value)",
               bytes, src_device, dst_device, standin);
    HostBackend::copy(dst, dst_device, src, src_device, bytes);
  }

  std::unique_ptr<CapturedWork> capture(int, const std::function<void()>& work) override {
    const uint64_t pool = allocator_.begin_pool();
    try {
      work();
    } catch (...) {
      allocator_.end_pool();
      allocator_.release_pool(pool);
      throw;
    }
    allocator_.end_pool();
    return std::make_unique<CheckedCapture>(allocator_, pool);
  }

 private:
  HostCachingAllocator allocator_;  // its own: separate memory, separate statistics
};
}  // namespace

void enable_standin_device() {
  if (has_backend(DeviceType::standin)) return;
  static StandinBackend* standin = new StandinBackend;  // never destroyed: storages may outlive main
  register_backend(DeviceType::standin, standin);
  copy_kernels(DeviceType::cpu, DeviceType::standin);
}

}  // namespace loom
