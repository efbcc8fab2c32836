#pragma once
// The sum of per-micro-batch gradients in a fixed binary tree over the micro-batch
// index, so that the bits do not depend on how the micro-batches are spread over
// ranks. The tree over micro-batches [lo, hi) adds the trees over [lo, mid) and
// [mid, hi), mid = lo + ceil((hi - lo) / 2):
//   3 micro-batches: (g0 + g1) + g2          6: ((g0 + g1) + g2) + ((g3 + g4) + g5)
// With P ranks, each holding m consecutive micro-batches of the M = m * P, a rank
// sums the largest subtrees that lie within its block (one when P is a power of
// two; with 3 ranks of 2, rank 1 holds g2 and g3, the subtrees [2, 3) and [3, 4)),
// and Communicator::all_reduce_tree adds the ranks' subtrees in the tree above
// them: the result has the same bits at any P.
#include <cstdint>
#include <vector>

#include "loom/tensor.h"

namespace loom::dist {

// Micro-batches [lo, hi) of a tree's leaves.
struct LeafRange {
  int64_t lo, hi;
  bool operator==(const LeafRange&) const = default;
};

// The largest subtrees of the tree over `count` leaves that lie within `within`,
// left to right: they cover it, and {within} itself when it is a subtree.
std::vector<LeafRange> largest_subtrees(int64_t count, LeafRange within);

// Adds micro-batch gradients one at a time, in micro-batch order, into the tree
// over `count` of them, merging each subtree as soon as it is complete: at most
// log2(count) + 1 partial sums live at once. Each gradient is read during add()
// only (the caller may reuse its storage afterwards). float32/float64 CPU tensors,
// contiguous, all of one shape and dtype.
class TreeAccumulator {
 public:
  explicit TreeAccumulator(int64_t count) : TreeAccumulator(count, {0, count}) {}
  // Only the micro-batches `mine` of the tree over `count` (a rank's block): the
  // sums are those of largest_subtrees(count, mine).
  TreeAccumulator(int64_t count, LeafRange mine);

  void add(const Tensor& micro_batch_grad);
  // The tree sum, in fresh storage, once all `count` gradients have been added.
  Tensor result();
  // Once all of `mine` are added: the sums of its largest subtrees, left to right.
  std::vector<Tensor> subtree_sums();
  // For a last gradient that arrives in pieces (GradientReducer's buckets): once all
  // of `mine` but the last have been added, the elements [begin, begin + n) of the
  // subtree sums, given those elements of the last gradient: the last subtree's
  // written into `out` (n elements, may be `last` itself), the others views of the
  // partial sums, which stay for the other pieces. The same bits as add(last) then
  // subtree_sums().
  std::vector<Tensor> finish_range(const Tensor& last, int64_t begin, Tensor& out) const;

  int64_t count() const { return count_; }
  int64_t added() const { return added_; }

 private:
  struct Partial {
    Tensor sum;  // owned: never one of the caller's tensors
    int64_t lo, hi;
  };
  bool is_node(int64_t lo, int64_t hi) const;
  int64_t mine_size() const { return mine_.hi - mine_.lo; }

  int64_t count_;
  LeafRange mine_;
  int64_t added_ = 0;
  std::vector<Partial> partials_;  // complete subtrees, left to right
};

// The tree sum of the gradients (in fresh storage): the reference every world size must match.
Tensor tree_sum(const std::vector<Tensor>& micro_batch_grads);

}  // namespace loom::dist
