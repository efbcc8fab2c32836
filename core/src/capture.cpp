#include "loom/capture.h"

#include <optional>

#include "loom/backend.h"
#include "loom/error.h"

namespace loom {

namespace {
thread_local std::optional<Device> t_capturing;  // the device this thread captures on
}  // namespace

std::unique_ptr<CapturedWork> Backend::capture(int, const std::function<void()>&, uint64_t&) {
  fail("capture: this device cannot capture work for replay");
}

CapturePool::~CapturePool() {
  if (id_) allocator(device_).release_pool(id_);
}

std::unique_ptr<CapturedWork> capture(Device device, const std::function<void()>& work,
                                      std::shared_ptr<CapturePool> pool) {
  LOOM_CHECK(!t_capturing, "capture: this thread is already capturing on {}", *t_capturing);
  LOOM_CHECK(device.type != DeviceType::cpu,
             "capture: {} runs work as it is issued: capturing and replaying it (CUDA graphs) needs a GPU", device);
  Backend& b = backend(device.type);
  struct Capturing {
    explicit Capturing(Device d) { t_capturing = d; }
    ~Capturing() { t_capturing.reset(); }
  } scope(device);
  if (!pool) pool = std::make_shared<CapturePool>(device);
  LOOM_CHECK(pool->device() == device, "capture: a pool of {} for work on {}", pool->device(), device);
  std::unique_ptr<CapturedWork> captured = b.capture(device.index, work, pool->id());
  captured->keep(std::move(pool));
  return captured;
}

bool capturing(Device device) { return t_capturing && *t_capturing == device; }

void check_capturable_copy(Device device, Device src, Device dst, size_t bytes) {
  LOOM_CHECK(!capturing(device) || (src == device && dst == device),
             "capture: a copy of {} bytes from {} to {} while capturing work on {}: a captured step may not read from "
             "or write to the host (a GPU's capture fails there, or a replay copies a stale value)",
             bytes, src, dst, device);
}

}  // namespace loom
