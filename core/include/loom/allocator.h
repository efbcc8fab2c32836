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
#include <utility>
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

  // Private pools, for captured work (loom/capture.h): between begin_pool() and
  // end_pool() every block comes from, and goes back to, a pool of its own, never the
  // shared free lists, so a replay, which writes the blocks the capture used, reaches no
  // other tensor. begin_pool(id) takes up pool id again (works captured one after the
  // other sharing their temporaries' memory); begin_pool(0) starts a new one. Its id
  // is returned. release_pool(id), once the captured work is gone: the pool's free
  // blocks join the shared cache, and so do its blocks still in use when they are freed.
  // An allocator without pools refuses (the default).
  virtual uint64_t begin_pool(uint64_t id = 0);
  virtual void end_pool() {}
  virtual void release_pool(uint64_t) {}
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
  uint64_t begin_pool(uint64_t id = 0) override;
  void end_pool() override;
  void release_pool(uint64_t id) override;

 protected:
  virtual void* system_allocate(size_t bytes) = 0;
  virtual void system_free(void* ptr) = 0;

 private:
  void release_cached();  // every free list back to the system; mutex_ held

  using FreeLists = std::map<size_t, std::vector<void*>>;  // by block size
  // The smallest block of `lists` of at least `size` and at most twice it ({nullptr, 0}: none).
  static std::pair<void*, size_t> take(FreeLists& lists, size_t size);

  mutable std::mutex mutex_;
  FreeLists free_lists_;
  std::unordered_map<void*, size_t> block_sizes_;  // blocks handed out: their size (may exceed the request's class)
  AllocatorStats stats_;
  std::map<uint64_t, FreeLists> pools_;          // live private pools: their free blocks
  std::unordered_map<void*, uint64_t> pool_of_;  // blocks a live pool owns
  uint64_t active_pool_ = 0, next_pool_ = 1;     // 0: no pool active
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
