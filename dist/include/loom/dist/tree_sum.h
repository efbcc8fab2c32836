#pragma once
// The sum of per-micro-batch gradients in a fixed binary tree over the micro-batch
// index, so that the bits do not depend on how the micro-batches are spread over
// ranks. The tree over micro-batches [lo, hi) adds the trees over [lo, mid) and
// [mid, hi), mid = lo + ceil((hi - lo) / 2):
//   3 micro-batches: (g0 + g1) + g2          6: ((g0 + g1) + g2) + ((g3 + g4) + g5)
// With P ranks (a power of two), each holding m consecutive micro-batches of the
// M = m * P, every rank's block is a subtree, and the rank blocks are joined by the
// balanced tree ((r0 + r1) + (r2 + r3)) that Communicator::all_reduce_sum's exact
// mode computes: the result has the same bits at any P.
#include <cstdint>
#include <vector>

#include "loom/tensor.h"

namespace loom::dist {

// Adds micro-batch gradients one at a time, in micro-batch order, into the tree
// over `count` of them, merging each subtree as soon as it is complete: at most
// log2(count) + 1 partial sums live at once. Each gradient is read during add()
// only (the caller may reuse its storage afterwards). float32/float64 CPU tensors,
// contiguous, all of one shape and dtype.
class TreeAccumulator {
 public:
  explicit TreeAccumulator(int64_t count);

  void add(const Tensor& micro_batch_grad);
  // The tree sum, in fresh storage, once all `count` gradients have been added.
  Tensor result();
  // For a last gradient that arrives in pieces (GradientReducer's buckets): once
  // count - 1 gradients have been added, writes elements [begin, begin + n) of the
  // tree sum into `out` (n elements, may be `last` itself), given those elements of
  // the last gradient. The same bits as add(last) then result(); the partial sums stay
  // for the other pieces.
  void finish_range(const Tensor& last, int64_t begin, Tensor& out) const;

  int64_t count() const { return count_; }
  int64_t added() const { return added_; }

 private:
  struct Partial {
    Tensor sum;  // owned: never one of the caller's tensors
    int64_t lo, hi;
  };
  bool is_node(int64_t lo, int64_t hi) const;

  int64_t count_;
  int64_t added_ = 0;
  std::vector<Partial> partials_;  // complete subtrees, left to right
};

// The tree sum of the gradients (in fresh storage): the reference every world size must match.
Tensor tree_sum(const std::vector<Tensor>& micro_batch_grads);

}  // namespace loom::dist
