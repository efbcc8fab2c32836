#include "loom/storage.h"

#include "loom/backend.h"
#include "loom/error.h"
#include "loom/kernel_table.h"

namespace loom {

Storage::Storage(size_t nbytes, Device device) : nbytes_(nbytes), device_(device) {
  data_ = allocator(device).allocate(nbytes);
  host_accessible_ = backend(device.type).host_accessible();
}

std::shared_ptr<Storage> Storage::borrow(void* data, size_t nbytes, Device device, std::function<void()> release) {
  LOOM_CHECK(release != nullptr, "Storage::borrow: no release function for memory loom does not own");
  return std::shared_ptr<Storage>(new Storage(data, nbytes, device, std::move(release)));
}

Storage::Storage(void* data, size_t nbytes, Device device, std::function<void()> release)
    : data_(data), nbytes_(nbytes), device_(device), release_(std::move(release)) {
  host_accessible_ = backend(device.type).host_accessible();
}

void Storage::check_kernel_access() const {
  LOOM_CHECK(KernelScope::active(),
             "memory of {} touched outside a kernel: an op must reach device memory through the kernel table "
             "(find_kernel) or the Backend",
             device_);
}

Storage::~Storage() {
  if (release_)
    release_();
  else
    allocator(device_).deallocate(data_, nbytes_);
}

}  // namespace loom
