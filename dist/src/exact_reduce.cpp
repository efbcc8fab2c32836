// The exact collectives, over Communicator::send_recv: Rabenseifner's reduce-scatter
// by recursive halving, then (for the all-reduce) an all-gather by recursive
// doubling. Step k pairs rank r with r ^ 2^k and puts the lower ranks' partial sum
// on the left, as tree_sum does, so every element is the balanced tree
// ((r0 + r1) + (r2 + r3)) ... whichever rank reduces it. Each step moves half the
// data of the one before: 2 (P - 1) / P of the tensor per rank in all, as MPI's own
// large-message all-reduce does.
#include <algorithm>
#include <cstring>
#include <vector>

#include "dist_internal.h"

namespace loom::dist::detail {

namespace {

struct Chunks {  // chunk indices [lo, hi)
  int lo, hi;
};

// Chunk c is elements [bounds[c], bounds[c + 1]): `parts` chunks as equal as they come.
std::vector<int64_t> balanced_bounds(int64_t n, int parts) {
  std::vector<int64_t> bounds(parts + 1);
  for (int c = 0; c <= parts; ++c) bounds[c] = c * (n / parts) + std::min<int64_t>(c, n % parts);
  return bounds;
}

template <typename T>
struct Halved {
  Chunks mine;          // one chunk: the one this rank holds the sum of
  const T* chunk_sums;  // its first element
};

// The reduce-scatter: reads `in` (all chunks, this rank's values) and writes the
// partial sums into `work`, which holds elements [work_origin, ...) and may be `in`.
// held[k] is the range of chunks this rank held before step k.
template <typename T>
Halved<T> halve(Communicator& comm, const T* in, T* work, int64_t work_origin, const std::vector<int64_t>& bounds,
                std::vector<Chunks>& held) {
  const int rank = comm.rank(), world = comm.world_size();
  auto count = [&](Chunks c) { return bounds[c.hi] - bounds[c.lo]; };
  Chunks mine{0, world};
  const T* sums = in;
  int64_t sums_origin = 0;
  Tensor received;  // the partner's half: the first step's is the largest
  if (world > 1)
    received = Tensor::empty({std::max(bounds[world / 2], bounds[world] - bounds[world / 2])}, {dtype_of<T>()});
  for (int bit = 1; bit < world; bit <<= 1) {
    held.push_back(mine);
    const int mid = (mine.lo + mine.hi) / 2;
    const bool lower = (rank & bit) == 0;
    const Chunks keep = lower ? Chunks{mine.lo, mid} : Chunks{mid, mine.hi};
    const Chunks give = lower ? Chunks{mid, mine.hi} : Chunks{mine.lo, mid};
    T* recv = received.data<T>();
    comm.send_recv(rank ^ bit, sums + (bounds[give.lo] - sums_origin), count(give), recv, count(keep), dtype_of<T>());
    const T* kept = sums + (bounds[keep.lo] - sums_origin);
    T* out = work + (bounds[keep.lo] - work_origin);
    if (lower) {
      add_elements(out, kept, recv, count(keep));
    } else {
      add_elements(out, recv, kept, count(keep));
    }
    sums = work;
    sums_origin = work_origin;
    mine = keep;
  }
  return {mine, sums + (bounds[mine.lo] - sums_origin)};
}

}  // namespace

void exact_all_reduce(Communicator& comm, Tensor& t) {
  with_float_type(t.dtype(), [&](auto zero) {
    using T = decltype(zero);
    T* data = t.data<T>();
    const std::vector<int64_t> bounds = balanced_bounds(t.numel(), comm.world_size());
    std::vector<Chunks> held;
    Chunks mine = halve<T>(comm, data, data, 0, bounds, held).mine;
    // The all-gather undoes the steps, last first: send the sums held, receive the partner's.
    for (int step = static_cast<int>(held.size()); step-- > 0;) {
      const Chunks before = held[step];
      const Chunks theirs = mine.lo == before.lo ? Chunks{mine.hi, before.hi} : Chunks{before.lo, mine.lo};
      comm.send_recv(comm.rank() ^ (1 << step), data + bounds[mine.lo], bounds[mine.hi] - bounds[mine.lo],
                     data + bounds[theirs.lo], bounds[theirs.hi] - bounds[theirs.lo], dtype_of<T>());
      mine = before;
    }
  });
}

void exact_reduce_scatter(Communicator& comm, const Tensor& input, Tensor& output) {
  with_float_type(input.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const int rank = comm.rank(), world = comm.world_size();
    const int64_t n = output.numel();
    std::vector<int64_t> bounds(world + 1);
    for (int c = 0; c <= world; ++c) bounds[c] = c * n;
    // After the first step a rank only ever writes within the half it kept.
    const int64_t origin = world > 1 && (rank & 1) ? bounds[world / 2] : 0;
    Tensor work = Tensor::empty({world > 1 ? bounds[world] / 2 : 0}, {input.dtype()});
    std::vector<Chunks> held;
    const Halved<T> halved = halve<T>(comm, input.data<T>(), work.data<T>(), origin, bounds, held);
    // Halving leaves rank r with chunk bit-reverse(r); bit reversal is its own
    // inverse, so that chunk's owner holds the sum of this rank's chunk.
    const int owner = halved.mine.lo;
    if (owner == rank) {
      std::memcpy(output.data<T>(), halved.chunk_sums, static_cast<size_t>(n) * sizeof(T));
    } else {
      comm.send_recv(owner, halved.chunk_sums, n, output.data<T>(), n, dtype_of<T>());
    }
  });
}

}  // namespace loom::dist::detail
