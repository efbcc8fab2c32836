// The caching allocator: a repeated step makes no new system allocations.
#include <doctest/doctest.h>

#include <algorithm>
#include <vector>

#include "loom/backend.h"
#include "loom/ops.h"

using namespace loom;

TEST_CASE("size classes round up by at most a quarter, in multiples of 64 bytes") {
  CHECK(allocator_size_class(1) == 64);
  CHECK(allocator_size_class(64) == 64);
  CHECK(allocator_size_class(65) == 128);
  for (size_t bytes : {100u, 1000u, 4097u, 123457u, 10000000u}) {
    size_t c = allocator_size_class(bytes);
    CHECK(c >= bytes);
    CHECK(c % 64 == 0);
    CHECK(c <= bytes + bytes / 4 + 64);
  }
}

namespace {
// One step of a two-layer network: forward, backward, an SGD update in place.
void train_step(const Tensor& x, const Tensor& w1, const Tensor& w2) {
  Tensor loss = mean(pow(matmul(tanh(matmul(x, w1)), w2), 2.0));
  loss.backward();
  NoGradGuard no_grad;
  copy_(w1, w1 - w1.grad() * 0.01);
  copy_(w2, w2 - w2.grad() * 0.01);
  w1.set_grad({});
  w2.set_grad({});
}
}  // namespace

TEST_CASE("a repeated training step makes no new system allocations after the first") {
  Generator gen(3);
  Tensor x = rand({64, 32}, {f32}, gen);
  Tensor w1 = randn({32, 48}, {f32}, gen, 0, 0.1);
  Tensor w2 = randn({48, 8}, {f32}, gen, 0, 0.1);
  w1.requires_grad_();
  w2.requires_grad_();
  Allocator& cpu = allocator(kCPU);
  train_step(x, w1, w2);  // warms the cache
  AllocatorStats before = cpu.stats();
  for (int i = 0; i < 5; ++i) train_step(x, w1, w2);
  AllocatorStats after = cpu.stats();
  CHECK(after.system_allocations == before.system_allocations);
  CHECK(after.allocations > before.allocations);  // the steps did allocate, from the cache
  CHECK(after.cache_hits - before.cache_hits == after.allocations - before.allocations);
  CHECK(after.bytes_in_use == before.bytes_in_use);  // nothing leaked between steps
}

TEST_CASE("statistics: in use, peak, cached; empty_cache gives memory back") {
  Allocator& cpu = allocator(kCPU);
  cpu.empty_cache();
  cpu.reset_peak();
  AllocatorStats base = cpu.stats();
  CHECK(base.bytes_cached == 0);
  {
    Tensor a = Tensor::empty({1000}, {f32});  // 4000 bytes -> class 4096
    AllocatorStats s = cpu.stats();
    CHECK(s.bytes_in_use == base.bytes_in_use + allocator_size_class(4000));
    CHECK(s.peak_bytes_in_use >= s.bytes_in_use);
  }
  AllocatorStats freed = cpu.stats();
  CHECK(freed.bytes_in_use == base.bytes_in_use);
  CHECK(freed.bytes_cached == allocator_size_class(4000));
  uint64_t system_before = freed.system_allocations;
  Tensor again = Tensor::empty({1000}, {f32});  // same class: served from the cache
  CHECK(cpu.stats().system_allocations == system_before);
  again = Tensor();
  cpu.empty_cache();
  CHECK(cpu.stats().bytes_cached == 0);
}

TEST_CASE("varying shapes reuse cached blocks up to twice their size: the cache stays near the working set") {
  Allocator& cpu = allocator(kCPU);
  cpu.empty_cache();
  // Like translation batches: a different length every step, the same budget.
  {
    Tensor big = Tensor::empty({1 << 20}, {f32});  // 4 MiB
  }
  uint64_t system_before = cpu.stats().system_allocations;
  for (int64_t rows : {1000, 900, 1023, 700, 800, 950, 600}) {
    Tensor step = Tensor::empty({rows, 1024}, {f32});  // 2.3-4 MiB: every one fits the cached 4 MiB block
    CHECK(cpu.stats().bytes_cached == 0);
  }
  CHECK(cpu.stats().system_allocations == system_before);
  // Smaller than half a cached block: a fresh one (a 4 MiB block is not spent on 1 MiB).
  Tensor small = Tensor::empty({256, 1024}, {f32});
  CHECK(cpu.stats().system_allocations == system_before + 1);
  small = Tensor();
  cpu.empty_cache();
}

TEST_CASE("shapes that only grow do not grow the cache without bound: it stays within twice the peak") {
  Allocator& cpu = allocator(kCPU);
  cpu.empty_cache();
  cpu.reset_peak();
  // Like decoding one position more per step: no block freed so far fits the next request.
  size_t most_cached = 0, sum_of_blocks = 0;
  for (int64_t mib = 1; mib <= 40; ++mib) {
    Tensor step = Tensor::empty({mib << 18}, {f32});
    sum_of_blocks += allocator_size_class(static_cast<size_t>(mib) << 20);
    step = Tensor();
    most_cached = std::max(most_cached, cpu.stats().bytes_cached);
  }
  const size_t limit = std::max(2 * cpu.stats().peak_bytes_in_use, CachingAllocator::kMinCacheLimit);
  CHECK(sum_of_blocks > 4 * limit);  // what an unbounded cache would have held
  CHECK(most_cached <= limit);
  cpu.empty_cache();
}

TEST_CASE("a private pool (captured work) keeps its blocks from other tensors until it is released") {
  HostCachingAllocator a;
  void* shared = a.allocate(4000);
  a.deallocate(shared, 4000);  // cached in the shared lists
  const uint64_t pool = a.begin_pool();
  void* in_pool = a.allocate(4000);
  CHECK(in_pool != shared);  // a capture does not take shared blocks: eager tensors may still hold them
  a.deallocate(in_pool, 4000);
  void* reused = a.allocate(4000);
  CHECK(reused == in_pool);       // freed while capturing: reused by the same capture (stream order)
  void* kept = a.allocate(4000);  // a tensor the captured work leaves behind
  a.deallocate(reused, 4000);
  a.end_pool();
  void* eager = a.allocate(4000);
  CHECK(eager == shared);  // the shared block, never the pool's free one: a replay writes that
  a.deallocate(eager, 4000);
  void* eager2 = a.allocate(4000);
  CHECK(eager2 != reused);
  CHECK(eager2 != kept);
  a.deallocate(eager2, 4000);
  a.release_pool(pool);  // the captured work is gone: its free block joins the shared cache
  std::vector<void*> taken;
  for (int i = 0; i < 3; ++i) taken.push_back(a.allocate(4000));
  CHECK(std::find(taken.begin(), taken.end(), reused) != taken.end());
  a.deallocate(kept, 4000);  // freed after the release: shared too
  void* last = a.allocate(4000);
  CHECK(last == kept);
  for (void* p : taken) a.deallocate(p, 4000);
  a.deallocate(last, 4000);
  CHECK(a.stats().bytes_in_use == 0);
  CHECK_THROWS_AS((a.begin_pool(), a.begin_pool()), Error);  // one capture at a time
}
