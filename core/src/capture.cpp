#include "loom/capture.h"

#include <optional>

#include "loom/backend.h"
#include "loom/error.h"

namespace loom {

namespace {
thread_local std::optional<Device> t_capturing;  // the device this thread captures on
}  // namespace

std::unique_ptr<CapturedWork> Backend::capture(int, const std::function<void()>&) {
  fail("capture: this device cannot capture work for replay");
}

std::unique_ptr<CapturedWork> capture(Device device, const std::function<void()>& work) {
  LOOM_CHECK(!t_capturing, "capture: this thread is already capturing on {}", *t_capturing);
  LOOM_CHECK(device.type != DeviceType::cpu,
             "capture: {} runs work as it is issued: capturing and replaying it (CUDA graphs) needs a GPU", device);
  Backend& b = backend(device.type);
  struct Capturing {
    explicit Capturing(Device d) { t_capturing = d; }
    ~Capturing() { t_capturing.reset(); }
  } scope(device);
  return b.capture(device.index, work);
}

bool capturing(Device device) { return t_capturing && *t_capturing == device; }

}  // namespace loom
