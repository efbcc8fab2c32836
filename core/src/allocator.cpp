#include "loom/allocator.h"

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <cstring>

#include "loom/backend.h"
#include "loom/error.h"

namespace loom {

size_t allocator_size_class(size_t bytes) {
  if (bytes <= 64) return 64;
  // Round up to the next of 4 evenly spaced steps between powers of two.
  size_t power = std::bit_floor(bytes);
  size_t step = std::max<size_t>(power / 4, 64);  // aligned_alloc needs multiples of 64
  return (bytes + step - 1) / step * step;
}

void* CachingAllocator::allocate(size_t bytes) {
  size_t size = allocator_size_class(bytes);
  std::lock_guard lock(mutex_);
  ++stats_.allocations;
  void* ptr = nullptr;
  auto it = free_lists_.find(size);
  if (it != free_lists_.end() && !it->second.empty()) {
    ptr = it->second.back();
    it->second.pop_back();
    stats_.bytes_cached -= size;
    ++stats_.cache_hits;
  } else {
    ptr = system_allocate(size);
    if (!ptr) {
      // Give the cache back and retry once before reporting out-of-memory.
      for (auto& [class_size, blocks] : free_lists_)
        for (void* block : blocks) system_free(block);
      free_lists_.clear();
      stats_.bytes_cached = 0;
      ptr = system_allocate(size);
      if (!ptr) fail("allocator: out of memory allocating {} bytes", size);
    }
    ++stats_.system_allocations;
  }
  stats_.bytes_in_use += size;
  if (stats_.bytes_in_use > stats_.peak_bytes_in_use) stats_.peak_bytes_in_use = stats_.bytes_in_use;
  return ptr;
}

void CachingAllocator::deallocate(void* ptr, size_t bytes) {
  if (!ptr) return;
  size_t size = allocator_size_class(bytes);
  std::lock_guard lock(mutex_);
  free_lists_[size].push_back(ptr);
  stats_.bytes_in_use -= size;
  stats_.bytes_cached += size;
}

AllocatorStats CachingAllocator::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

void CachingAllocator::reset_peak() {
  std::lock_guard lock(mutex_);
  stats_.peak_bytes_in_use = stats_.bytes_in_use;
}

void CachingAllocator::empty_cache() {
  std::lock_guard lock(mutex_);
  for (auto& [size, blocks] : free_lists_)
    for (void* block : blocks) system_free(block);
  free_lists_.clear();
  stats_.bytes_cached = 0;
}

namespace {

class CpuAllocator final : public CachingAllocator {
 protected:
  // 64-byte alignment: a cache line, and enough for any AVX-512 load.
  void* system_allocate(size_t bytes) override { return std::aligned_alloc(64, bytes); }
  void system_free(void* ptr) override { std::free(ptr); }
};

class CpuBackend final : public Backend {
 public:
  Allocator& allocator(int) override { return allocator_; }
  void copy(void* dst, Device, const void* src, Device, size_t bytes) override {
    if (bytes) std::memcpy(dst, src, bytes);
  }
  int device_count() const override { return 1; }

 private:
  CpuAllocator allocator_;
};

struct BackendTable {
  Backend* backends[2] = {nullptr, nullptr};
};

BackendTable& table() {
  // Never destroyed: storages freed during static destruction still find it.
  static BackendTable* t = [] {
    auto* tbl = new BackendTable;
    tbl->backends[0] = new CpuBackend;
    return tbl;
  }();
  return *t;
}

}  // namespace

Backend& backend(DeviceType type) {
  Backend* b = table().backends[static_cast<int>(type)];
  if (!b)
    fail("device: no backend for {} in this build (was loom built with CUDA, and is a GPU present?)",
         type == DeviceType::cuda ? "cuda" : "cpu");
  return *b;
}

bool has_backend(DeviceType type) { return table().backends[static_cast<int>(type)] != nullptr; }

void register_backend(DeviceType type, Backend* b) { table().backends[static_cast<int>(type)] = b; }

Allocator& allocator(Device device) { return backend(device.type).allocator(device.index); }

}  // namespace loom
