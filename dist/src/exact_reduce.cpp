// The exact collectives, over Communicator::send_recv, at any world size. The leaves
// of the tree over every rank's micro-batches are each rank's largest subtrees
// (tree_sum.h). The elements are cut into world_size() chunks: rank r gathers chunk r
// of every rank's subtree sums, adds them in the tree above the subtrees, and (for
// the all-reduce) sends its chunk of the sum to every rank. Each element is thus
// added in the same tree whichever rank adds it, and that tree does not depend on
// the world size. A rank holding one subtree sends (P - 1) / P of it and receives as
// much of the sum: 2 (P - 1) / P of the tensor, as MPI's large-message all-reduce
// moves; a subtree that straddles ranks (P not a power of two) costs one more.
#include <algorithm>
#include <bit>
#include <cstring>
#include <vector>

#include "dist_internal.h"
#include "loom/dist/tree_sum.h"

namespace loom::dist::detail {

namespace {

// Chunk c is elements [bounds[c], bounds[c + 1]): `parts` chunks as equal as they come.
std::vector<int64_t> balanced_bounds(int64_t n, int parts) {
  std::vector<int64_t> bounds(parts + 1);
  for (int c = 0; c <= parts; ++c) bounds[c] = c * (n / parts) + std::min<int64_t>(c, n % parts);
  return bounds;
}

// Calls exchange(peer) once for every other rank, in rounds that pair each rank with
// one other (rank ^ 1, rank ^ 2, rank ^ 3, ...; a pair past the last rank sits out),
// so that both sides of a send_recv call it in the same round.
template <typename F>
void for_each_peer(int rank, int world, F&& exchange) {
  const int rounds = static_cast<int>(std::bit_ceil(static_cast<unsigned>(world)));
  for (int step = 1; step < rounds; ++step)
    if (const int peer = rank ^ step; peer < world) exchange(peer);
}

template <typename T>
class ChunkReduction {
 public:
  ChunkReduction(Communicator& comm, std::span<const Tensor> mine, const SubtreeLayout& layout,
                 const std::vector<int64_t>& bounds)
      : rank_(comm.rank()), layout_(layout), mine_(mine), begin_(bounds[rank_]), n_(bounds[rank_ + 1] - begin_) {
    // From every other rank, chunk `rank` of each of its subtree sums, one after another;
    // to it, its chunk of each of this rank's, one send_recv per subtree.
    received_.resize(comm.world_size());
    for_each_peer(rank_, comm.world_size(), [&](int peer) {
      const size_t theirs = layout.subtrees[peer].size();
      received_[peer] = Tensor::empty({static_cast<int64_t>(theirs) * n_}, {dtype_of<T>()});
      const int64_t send_count = bounds[peer + 1] - bounds[peer];
      for (size_t j = 0; j < std::max(theirs, mine.size()); ++j) {
        const bool sends = j < mine.size(), receives = j < theirs;
        comm.send_recv(peer, sends ? mine[j].data<T>() + bounds[peer] : nullptr, sends ? send_count : 0,
                       receives ? received_[peer].data<T>() + j * n_ : nullptr, receives ? n_ : 0, dtype_of<T>());
      }
    });
  }

  // Elements [bounds[rank], bounds[rank + 1]) of the tree's sum, into `out`.
  void sum_into(T* out) {
    const Value sum = node({0, layout_.leaves_per_rank * static_cast<int64_t>(received_.size())}, out);
    if (sum.data != out) std::memcpy(out, sum.data, static_cast<size_t>(n_) * sizeof(T));
  }

 private:
  struct Value {
    const T* data;
    Tensor owned;  // the buffer data points into, when made here
  };

  // The sum of the subtree `range` on this rank's chunk (split as tree_sum.h says):
  // a rank's subtree sum as it came, or left + right written into `into` or, when
  // that is null, into a child's buffer or a new one. Elementwise, so `into` may be
  // one of the subtrees read.
  Value node(LeafRange range, T* into) {
    const int owner = static_cast<int>(range.lo / layout_.leaves_per_rank);
    if ((range.hi - 1) / layout_.leaves_per_rank == owner) return {subtree(owner, range), Tensor()};
    const int64_t mid = range.lo + (range.hi - range.lo + 1) / 2;
    const Value left = node({range.lo, mid}, nullptr);
    const Value right = node({mid, range.hi}, nullptr);
    Tensor owned;
    if (into == nullptr) {
      owned = left.owned.defined()    ? left.owned
              : right.owned.defined() ? right.owned
                                      : Tensor::empty({n_}, {dtype_of<T>()});
      into = owned.data<T>();
    }
    add_elements(into, left.data, right.data, n_);
    return {into, owned};
  }

  // Rank `owner`'s sum of one of its largest subtrees, on this rank's chunk.
  const T* subtree(int owner, LeafRange range) const {
    const std::vector<LeafRange>& of_owner = layout_.subtrees[owner];
    const auto j = std::find(of_owner.begin(), of_owner.end(), range) - of_owner.begin();
    LOOM_CHECK(j < static_cast<int64_t>(of_owner.size()),
               "all_reduce_tree: micro-batches [{}, {}) are not a subtree of rank {}", range.lo, range.hi, owner);
    if (owner == rank_) return mine_[j].data<T>() + begin_;
    return received_[owner].data<T>() + j * n_;
  }

  int rank_;
  const SubtreeLayout& layout_;
  std::span<const Tensor> mine_;
  int64_t begin_, n_;
  std::vector<Tensor> received_;  // per rank
};

}  // namespace

SubtreeLayout::SubtreeLayout(int world, int64_t per_rank) : leaves_per_rank(per_rank) {
  for (int q = 0; q < world; ++q)
    subtrees.push_back(largest_subtrees(per_rank * world, {q * per_rank, (q + 1) * per_rank}));
}

void exact_all_reduce(Communicator& comm, std::span<const Tensor> subtree_sums, int64_t leaves_per_rank, Tensor& out) {
  with_float_type(out.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const int rank = comm.rank(), world = comm.world_size();
    const SubtreeLayout layout(world, leaves_per_rank);
    const std::vector<int64_t> bounds = balanced_bounds(out.numel(), world);
    T* data = out.data<T>();
    ChunkReduction<T>(comm, subtree_sums, layout, bounds).sum_into(data + bounds[rank]);
    for_each_peer(rank, world, [&](int peer) {
      comm.send_recv(peer, data + bounds[rank], bounds[rank + 1] - bounds[rank], data + bounds[peer],
                     bounds[peer + 1] - bounds[peer], dtype_of<T>());
    });
  });
}

void exact_reduce_scatter(Communicator& comm, const Tensor& input, Tensor& output) {
  with_float_type(input.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const int world = comm.world_size();
    std::vector<int64_t> bounds(world + 1);
    for (int c = 0; c <= world; ++c) bounds[c] = c * output.numel();
    const SubtreeLayout layout(world, 1);
    ChunkReduction<T>(comm, std::span<const Tensor>(&input, 1), layout, bounds).sum_into(output.data<T>());
  });
}

}  // namespace loom::dist::detail
