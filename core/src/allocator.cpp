#include "loom/allocator.h"

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <cstring>

#include "loom/backend.h"
#include "cuda_layer.h"
#include "loom/error.h"

namespace loom {

size_t allocator_size_class(size_t bytes) {
  if (bytes <= 64) return 64;
  // Round up to the next of 4 evenly spaced steps between powers of two.
  size_t power = std::bit_floor(bytes);
  size_t step = std::max<size_t>(power / 4, 64);  // aligned_alloc needs multiples of 64
  return (bytes + step - 1) / step * step;
}

std::pair<void*, size_t> CachingAllocator::take(FreeLists& lists, size_t size) {
  // The smallest cached block of at least `size` and at most twice it. Taking
  // larger classes, not only the exact one, keeps the cache from growing a set
  // of blocks per shape when shapes vary from step to step (a translation
  // batch's length does): it then holds about the peak working set, not the
  // sum of every shape's.
  for (auto it = lists.lower_bound(size); it != lists.end() && it->first <= 2 * size; ++it) {
    if (it->second.empty()) continue;
    void* ptr = it->second.back();
    const size_t block = it->first;
    it->second.pop_back();
    if (it->second.empty()) lists.erase(it);
    return {ptr, block};
  }
  return {nullptr, 0};
}

void* CachingAllocator::allocate(size_t bytes) {
  const size_t size = allocator_size_class(bytes);
  std::lock_guard lock(mutex_);
  ++stats_.allocations;
  auto [ptr, block] = take(active_pool_ ? pools_[active_pool_] : free_lists_, size);
  if (ptr) {
    if (!active_pool_) stats_.bytes_cached -= block;
    ++stats_.cache_hits;
  } else {
    block = size;
    ptr = system_allocate(size);
    if (!ptr && !active_pool_) {
      // Give the cache back and retry once before reporting out-of-memory
      // (not while capturing: freeing device memory would wait for the device).
      release_cached();
      ptr = system_allocate(size);
    }
    if (!ptr) fail("allocator: out of memory allocating {} bytes", size);
    ++stats_.system_allocations;
    if (active_pool_) pool_of_[ptr] = active_pool_;
  }
  block_sizes_[ptr] = block;
  stats_.bytes_in_use += block;
  if (stats_.bytes_in_use > stats_.peak_bytes_in_use) stats_.peak_bytes_in_use = stats_.bytes_in_use;
  return ptr;
}

void CachingAllocator::deallocate(void* ptr, size_t bytes) {
  if (!ptr) return;
  std::lock_guard lock(mutex_);
  auto it = block_sizes_.find(ptr);
  LOOM_CHECK(it != block_sizes_.end(), "allocator: freeing {} bytes at {} that this allocator did not hand out", bytes,
             ptr);
  const size_t block = it->second;
  block_sizes_.erase(it);
  stats_.bytes_in_use -= block;
  if (auto owner = pool_of_.find(ptr); owner != pool_of_.end()) {
    pools_[owner->second][block].push_back(ptr);  // its pool's, for the capture's later allocations
    return;
  }
  free_lists_[block].push_back(ptr);
  stats_.bytes_cached += block;
  // Shapes that only grow (decoding: one position more every step) never fit
  // the smaller cached blocks, so the cache would hold every shape's blocks at
  // once. Bounded by the working set: past twice the peak, it all goes back.
  if (!active_pool_ && stats_.bytes_cached > std::max(2 * stats_.peak_bytes_in_use, kMinCacheLimit)) release_cached();
}

uint64_t Allocator::begin_pool(uint64_t) {
  fail("allocator: this device's allocator has no private pools (captured work)");
}

uint64_t CachingAllocator::begin_pool(uint64_t id) {
  std::lock_guard lock(mutex_);
  LOOM_CHECK(!active_pool_, "allocator: a private pool is already active (one capture at a time)");
  LOOM_CHECK(id == 0 || pools_.count(id), "allocator: private pool {} does not exist (released?)", id);
  active_pool_ = id ? id : next_pool_++;
  pools_[active_pool_];
  return active_pool_;
}

void CachingAllocator::end_pool() {
  std::lock_guard lock(mutex_);
  active_pool_ = 0;
}

void CachingAllocator::release_pool(uint64_t id) {
  std::lock_guard lock(mutex_);
  auto pool = pools_.find(id);
  if (pool == pools_.end()) return;
  for (auto& [block, ptrs] : pool->second)
    for (void* ptr : ptrs) {
      pool_of_.erase(ptr);
      free_lists_[block].push_back(ptr);
      stats_.bytes_cached += block;
    }
  pools_.erase(pool);
  std::erase_if(pool_of_, [id](const auto& owned) { return owned.second == id; });  // in use: shared when freed
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
  release_cached();
}

void CachingAllocator::release_cached() {
  for (auto& [size, blocks] : free_lists_)
    for (void* block : blocks) system_free(block);
  free_lists_.clear();
  stats_.bytes_cached = 0;
}

namespace {

class CpuBackend final : public HostBackend {
 public:
  Allocator& allocator(int) override { return allocator_; }
  bool host_accessible() const override { return true; }

 private:
  HostCachingAllocator allocator_;
};

struct BackendTable {
  Backend* backends[kDeviceTypes] = {};
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
  if (!b && type == DeviceType::cuda && load_cuda_layer()) b = table().backends[static_cast<int>(type)];
  if (!b)
    fail("device: no backend for {} in this build (was loom built with CUDA, and is a GPU present?)",
         device_type_name(type));
  return *b;
}

bool has_backend(DeviceType type) {
  if (table().backends[static_cast<int>(type)]) return true;
  return type == DeviceType::cuda && load_cuda_layer();
}

bool load_cuda_layer(std::string* why) {
  const std::string& failure = detail::open_cuda_layer();
  const bool loaded = table().backends[static_cast<int>(DeviceType::cuda)] != nullptr;
  if (why && !loaded) *why = failure;
  return loaded;
}

void register_backend(DeviceType type, Backend* b) { table().backends[static_cast<int>(type)] = b; }

Allocator& allocator(Device device) { return backend(device.type).allocator(device.index); }

void* HostCachingAllocator::system_allocate(size_t bytes) { return std::aligned_alloc(64, bytes); }
void HostCachingAllocator::system_free(void* ptr) { std::free(ptr); }

void HostBackend::copy(void* dst, Device, const void* src, Device, size_t bytes) {
  if (bytes) std::memcpy(dst, src, bytes);
}

void HostBackend::fill(void* dst, Device, const void* value, size_t element_bytes, size_t count) {
  // The value once, then the filled prefix doubled: log2(count) memcpys.
  auto* out = static_cast<char*>(dst);
  const size_t total = element_bytes * count;
  if (total == 0) return;
  std::memcpy(out, value, element_bytes);
  for (size_t filled = element_bytes; filled < total; filled *= 2)
    std::memcpy(out + filled, out, std::min(filled, total - filled));
}

}  // namespace loom
