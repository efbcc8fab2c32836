#include "loom/standin.h"

#include <vector>

#include "loom/backend.h"
#include "loom/capture.h"
#include "loom/error.h"
#include "loom/kernel_table.h"

namespace loom {

namespace {
// The stand-in's capture (loom/capture.h), a CUDA graph's semantics on host memory: the
// work's host code runs once while every outermost kernel call, fill and copy it makes
// is recorded, not run, with its arguments (loom/kernel_table.h), the same tensors and
// so the same memory; a replay calls them in order, its random draws moved by the
// replay's offset. Allocations come from a private pool, and a copy
// between the host and the stand-in is refused, as a GPU's capture would fail there:
// a CPU test finds what would break a capture, and a captured step's replays can be
// checked against eager steps bit for bit.
class RecordedWork final : public CapturedWork {
 public:
  explicit RecordedWork(std::vector<detail::RecordedCall> calls) : calls_(std::move(calls)) {}
  void replay(uint64_t random_offset) override {
    for (const detail::RecordedCall& call : calls_) call(random_offset);
  }
  size_t operations() const override { return calls_.size(); }

 private:
  std::vector<detail::RecordedCall> calls_;  // (their tensors go back to the pool before it is released)
};

class StandinBackend final : public HostBackend {
 public:
  Allocator& allocator(int) override { return allocator_; }
  bool host_accessible() const override { return false; }

  void copy(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes) override {
    check_capturable_copy(Device::standin(0), src_device, dst_device, bytes);
    if (auto* recorder = detail::call_recorder())
      return recorder->push_back([=, this](uint64_t) { HostBackend::copy(dst, dst_device, src, src_device, bytes); });
    HostBackend::copy(dst, dst_device, src, src_device, bytes);
  }

  void fill(void* dst, Device device, const void* value, size_t element_bytes, size_t count) override {
    if (auto* recorder = detail::call_recorder()) {
      const auto* first = static_cast<const unsigned char*>(value);
      return recorder->push_back([=, this, bytes = std::vector<unsigned char>(first, first + element_bytes)](uint64_t) {
        HostBackend::fill(dst, device, bytes.data(), element_bytes, count);
      });
    }
    HostBackend::fill(dst, device, value, element_bytes, count);
  }

  std::unique_ptr<CapturedWork> capture(int, const std::function<void()>& work, uint64_t& pool) override {
    pool = allocator_.begin_pool(pool);
    std::vector<detail::RecordedCall> calls;
    detail::call_recorder() = &calls;
    try {
      work();
    } catch (...) {
      detail::call_recorder() = nullptr;
      calls.clear();
      allocator_.end_pool();
      throw;
    }
    detail::call_recorder() = nullptr;
    allocator_.end_pool();
    return std::make_unique<RecordedWork>(std::move(calls));
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
