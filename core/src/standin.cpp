#include "loom/standin.h"

#include "loom/backend.h"
#include "loom/kernel_table.h"

namespace loom {

namespace {
class StandinBackend final : public HostBackend {
 public:
  Allocator& allocator(int) override { return allocator_; }
  bool host_accessible() const override { return false; }

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
