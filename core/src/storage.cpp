#include "loom/storage.h"

#include "loom/backend.h"
#include "loom/error.h"
#include "loom/kernel_table.h"

namespace loom {

Storage::Storage(size_t nbytes, Device device) : nbytes_(nbytes), device_(device) {
  data_ = allocator(device).allocate(nbytes);
  host_accessible_ = backend(device.type).host_accessible();
}

void Storage::check_kernel_access() const {
  LOOM_CHECK(KernelScope::active(),
             "memory of {} touched outside a kernel: an op must reach device memory through the kernel table "
             "(find_kernel) or the Backend",
             device_);
}

Storage::~Storage() { allocator(device_).deallocate(data_, nbytes_); }

}  // namespace loom
