#pragma once
// A caching allocator per device. Freed blocks go back to a free list of their
// size class instead of to the system, so a training step that repeats the same
// shapes makes no new system allocations after its first run. A request takes
// the smallest cached block of its class up to twice its size, so steps whose
// shapes vary reuse each other's blocks. The cache never holds more than twice
// the peak bytes in use (or kMinCacheLimit): past that it is released.
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "loom/device.h"

namespace loom {

struct AllocatorStats {
  size_t bytes_in_use = 0;          // block bytes handed out and not yet freed
  size_t peak_bytes_in_use = 0;     // high-water mark of bytes_in_use
  size_t bytes_cached = 0;          // bytes held in free lists, ready for reuse
  uint64_t system_allocations = 0;  // calls that reached the system allocator
  uint64_t allocations = 0;         // all allocate() calls
  uint64_t cache_hits = 0;          // allocate() calls served from a free list
};

class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual void* allocate(size_t bytes) = 0;
  virtual void deallocate(void* ptr, size_t bytes) = 0;
  virtual AllocatorStats stats() const = 0;
  virtual void reset_peak() = 0;
  virtual void empty_cache() = 0;  // return every cached block to the system
};

// Size classes: four steps per power of two (at most 25% waste), in multiples of 64 bytes.
size_t allocator_size_class(size_t bytes);

// The caching policy, shared by every device; a device supplies the raw calls.
// A device allocator that can be destroyed calls empty_cache() in its own
// destructor (the base cannot: system_free is gone by then).
class CachingAllocator : public Allocator {
 public:
  static constexpr size_t kMinCacheLimit = size_t{64} << 20;  // below it the cache is never released

  void* allocate(size_t bytes) override;
  void deallocate(void* ptr, size_t bytes) override;
  AllocatorStats stats() const override;
  void reset_peak() override;
  void empty_cache() override;

 protected:
  virtual void* system_allocate(size_t bytes) = 0;
  virtual void system_free(void* ptr) = 0;

 private:
  void release_cached();  // every free list back to the system; mutex_ held

  mutable std::mutex mutex_;
  std::map<size_t, std::vector<void*>> free_lists_;  // by block size
  std::unordered_map<void*, size_t> block_sizes_;    // blocks handed out: their size (may exceed the request's class)
  AllocatorStats stats_;
};

// The caching policy over 64-byte-aligned host memory (a cache line, and enough
// for any AVX-512 load): the CPU's allocator, and the stand-in device's.
class HostCachingAllocator final : public CachingAllocator {
 public:
  ~HostCachingAllocator() override { empty_cache(); }

 protected:
  void* system_allocate(size_t bytes) override;
  void system_free(void* ptr) override;
};

}  // namespace loom
