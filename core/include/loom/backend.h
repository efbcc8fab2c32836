#pragma once
// The seam between core and a device: memory and copies. cpu lives in core;
// cuda/ registers its own Backend at load time, so core never depends on CUDA.
#include "loom/allocator.h"
#include "loom/device.h"

namespace loom {

class Backend {
 public:
  virtual ~Backend() = default;
  virtual Allocator& allocator(int device_index) = 0;
  // Copies bytes between host memory and this device (either direction may be host).
  virtual void copy(void* dst, Device dst_device, const void* src, Device src_device,
                    size_t bytes) = 0;
  virtual int device_count() const = 0;
};

Backend& backend(DeviceType type);       // throws loom::Error if none is registered
bool has_backend(DeviceType type);
void register_backend(DeviceType type, Backend* backend);  // not owned
Allocator& allocator(Device device);

}  // namespace loom
