#include "loom/dist/tree_sum.h"

#include <cstring>

#include "dist_internal.h"

namespace loom::dist {

namespace {

constexpr std::string_view kOp = "tree_sum";

Tensor copy_of(const Tensor& t) {
  Tensor copy = Tensor::empty(t.shape(), {t.dtype()});
  std::memcpy(copy.raw_data(), t.raw_data(), static_cast<size_t>(t.numel()) * dtype_size(t.dtype()));
  return copy;
}

// left = left + right, in left's storage (owned by the accumulator).
void add_into(Tensor& left, const Tensor& right) {
  detail::with_float_type(left.dtype(), [&](auto zero) {
    using T = decltype(zero);
    detail::add_elements(left.data<T>(), left.data<T>(), right.data<T>(), left.numel());
  });
}

void collect_subtrees(LeafRange node, LeafRange within, std::vector<LeafRange>& out) {
  if (node.hi <= within.lo || node.lo >= within.hi) return;
  if (node.lo >= within.lo && node.hi <= within.hi) {
    out.push_back(node);
    return;
  }
  const int64_t mid = node.lo + (node.hi - node.lo + 1) / 2;
  collect_subtrees({node.lo, mid}, within, out);
  collect_subtrees({mid, node.hi}, within, out);
}

}  // namespace

std::vector<LeafRange> largest_subtrees(int64_t count, LeafRange within) {
  std::vector<LeafRange> out;
  collect_subtrees({0, count}, within, out);
  return out;
}

TreeAccumulator::TreeAccumulator(int64_t count, LeafRange mine) : count_(count), mine_(mine) {
  LOOM_CHECK(count >= 1, "{}: needs at least one micro-batch, not {}", kOp, count);
  LOOM_CHECK(0 <= mine.lo && mine.lo < mine.hi && mine.hi <= count,
             "{}: micro-batches [{}, {}) are not a part of a tree over {}", kOp, mine.lo, mine.hi, count);
}

// Whether [lo, hi) is a subtree: walk down from the root, halving as tree_sum.h says.
bool TreeAccumulator::is_node(int64_t lo, int64_t hi) const {
  int64_t node_lo = 0, node_hi = count_;
  while (node_lo != lo || node_hi != hi) {
    if (node_hi - node_lo < 2) return false;
    const int64_t mid = node_lo + (node_hi - node_lo + 1) / 2;
    if (hi <= mid) {
      node_hi = mid;
    } else if (lo >= mid) {
      node_lo = mid;
    } else {
      return false;
    }
  }
  return true;
}

void TreeAccumulator::add(const Tensor& g) {
  LOOM_CHECK(added_ < mine_size(), "{}: micro-batch {} added to a sum of {}", kOp, added_ + 1, mine_size());
  const std::string problem =
      detail::tensor_problem(kOp, fmt::format("micro-batch {}", added_), g, true, Device::cpu());
  LOOM_CHECK(problem.empty(), "{}", problem);
  if (!partials_.empty()) {
    const Tensor& first = partials_.front().sum;
    LOOM_CHECK(g.shape() == first.shape() && g.dtype() == first.dtype(),
               "{}: micro-batch {} is {} {}, the ones before it {} {}", kOp, added_, dtype_name(g.dtype()), g.shape(),
               dtype_name(first.dtype()), first.shape());
  }
  // The partials are complete subtrees left to right; the new gradient completes the
  // parents of those it now makes a subtree with, merged left + right.
  int64_t lo = mine_.lo + added_++;
  const int64_t hi = lo + 1;
  Tensor right = g;
  bool owned = false;
  while (!partials_.empty() && is_node(partials_.back().lo, hi)) {
    Partial left = std::move(partials_.back());
    partials_.pop_back();
    add_into(left.sum, right);
    right = std::move(left.sum);
    lo = left.lo;
    owned = true;
  }
  partials_.push_back({owned ? std::move(right) : copy_of(g), lo, hi});
}

Tensor TreeAccumulator::result() {
  LOOM_CHECK(mine_size() == count_, "{}: micro-batches [{}, {}) of {} have no one sum; take their subtree_sums()", kOp,
             mine_.lo, mine_.hi, count_);
  std::vector<Tensor> sums = subtree_sums();
  return std::move(sums.front());
}

std::vector<Tensor> TreeAccumulator::subtree_sums() {
  LOOM_CHECK(added_ == mine_size(), "{}: {} of {} micro-batches added", kOp, added_, mine_size());
  LOOM_CHECK(!partials_.empty(), "{}: the sum was already taken", kOp);
  std::vector<Tensor> sums;
  for (Partial& p : partials_) sums.push_back(std::move(p.sum));
  partials_.clear();
  return sums;
}

std::vector<Tensor> TreeAccumulator::finish_range(const Tensor& last, int64_t begin, Tensor& out) const {
  LOOM_CHECK(added_ == mine_size() - 1, "{}: a range of the last micro-batch after {} of {} micro-batches", kOp, added_,
             mine_size());
  const int64_t n = last.numel();
  LOOM_CHECK(out.numel() == n && out.dtype() == last.dtype() && out.is_contiguous() && last.is_contiguous(),
             "{}: the last micro-batch's range and its output differ ({} and {} elements)", kOp, n, out.numel());
  if (!partials_.empty())
    LOOM_CHECK(
        begin >= 0 && begin + n <= partials_.front().sum.numel() && last.dtype() == partials_.front().sum.dtype(),
        "{}: elements [{}, {}) of a {} sum of {}", kOp, begin, begin + n, dtype_name(partials_.front().sum.dtype()),
        partials_.front().sum.numel());
  // add() would merge the last gradient with the partials it completes a subtree
  // with, nearest first, left + right; the ones before those stay as they are.
  size_t merged = partials_.size();
  while (merged > 0 && is_node(partials_[merged - 1].lo, mine_.hi)) --merged;
  std::vector<Tensor> sums;
  for (size_t i = 0; i < merged; ++i)
    sums.push_back(Tensor::make_view(partials_[i].sum, {n}, {1}, partials_[i].sum.offset() + begin));
  detail::with_float_type(last.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const T* right = last.data<T>();
    T* sum = out.data<T>();
    if (merged == partials_.size() && sum != right) std::memcpy(sum, right, static_cast<size_t>(n) * sizeof(T));
    for (size_t left = partials_.size(); left-- > merged; right = sum)
      detail::add_elements(sum, partials_[left].sum.data<T>() + begin, right, n);
  });
  sums.push_back(out);
  return sums;
}

Tensor tree_sum(const std::vector<Tensor>& micro_batch_grads) {
  LOOM_CHECK(!micro_batch_grads.empty(), "{}: no micro-batch gradients", kOp);
  TreeAccumulator sum(static_cast<int64_t>(micro_batch_grads.size()));
  for (const Tensor& g : micro_batch_grads) sum.add(g);
  return sum.result();
}

}  // namespace loom::dist
