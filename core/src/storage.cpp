#include "loom/storage.h"

#include "loom/backend.h"

namespace loom {

Storage::Storage(size_t nbytes, Device device) : nbytes_(nbytes), device_(device) {
  data_ = allocator(device).allocate(nbytes);
}

Storage::~Storage() { allocator(device_).deallocate(data_, nbytes_); }

}  // namespace loom
