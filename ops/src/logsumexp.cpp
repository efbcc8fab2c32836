// logsumexp(x, dims, keepdim) = m + log(sum(exp(x - m))),  m = max of x over dims
//   dx = g * exp(x - out) = g * softmax(x)     (over dims)
// Subtracting the max keeps exp from overflowing (logsumexp([1000, 1000]) is
// 1000 + log 2, not inf). The fast kernel keeps a running max and rescales its
// sum when the max grows (one pass, any thread count gives the same bits); the
// reference kernel is the plain two-pass formula. The backward uses the output
// through the graph, so it differentiates again.
#include <cmath>

#include "elementwise.h"
#include "loom/kernels/reduce.h"

namespace loom {

namespace {
// Running (max, sum of exp(v - max)) in double.
template <typename T>
struct LogSumExpReducer {
  struct Acc {
    double max = -INFINITY;
    double sum = 0;
  };
  Acc init() const { return {}; }
  void add(Acc& acc, T value) const {
    double v = value;
    if (v > acc.max) {
      acc.sum = acc.sum * std::exp(acc.max - v) + 1;  // rescale to the new max
      acc.max = v;
    } else {
      acc.sum += v == acc.max ? 1 : std::exp(v - acc.max);  // v == max also covers +-inf
    }
  }
  void merge(Acc& acc, const Acc& other) const {
    if (other.max > acc.max) {
      acc.sum = acc.sum * std::exp(acc.max - other.max) + other.sum;
      acc.max = other.max;
    } else {
      acc.sum += other.max == acc.max ? other.sum : other.sum * std::exp(other.max - acc.max);
    }
  }
  T finish(const Acc& acc, int64_t) const { return static_cast<T>(acc.max + std::log(acc.sum)); }
};

// The formula as written: for each output, its max, then the sum of exp(x - max).
template <typename T>
void reference_logsumexp(const Tensor& out, const Tensor& x, const Shape& dims) {
  kernels::reference_reduce_each<T>(out, x, dims, [](auto at, int64_t count) {
    double m = -INFINITY;
    for (int64_t j = 0; j < count; ++j) m = std::max(m, at(j));
    if (!std::isfinite(m)) return m;  // all -inf (empty sum), or an inf that dominates
    double s = 0;
    for (int64_t j = 0; j < count; ++j) s += std::exp(at(j) - m);
    return m + std::log(s);
  });
}
}  // namespace

Tensor logsumexp(const Tensor& x, const Shape& dims, bool keepdim, Where where) {
  CallSite site(where);
  detail::require_cpu("logsumexp", x);
  Shape reduce_dims = kernels::normalize_dims(dims, x.dim(), "logsumexp");
  Tensor out = Tensor::empty(kernels::reduced_shape(x.shape(), reduce_dims, keepdim), {x.dtype(), x.device()});
  dispatch_floating(x.dtype(), "logsumexp", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (kernel_mode() == KernelMode::reference) reference_logsumexp<T>(out, x, reduce_dims);
    else kernels::reduce_loop<T, T>(out, x, reduce_dims, LogSumExpReducer<T>{});
  });
  return record("logsumexp", {x}, out, [x, reduce_dims, keepdim](BackwardContext& c, const Tensor& g) -> detail::Grads {
    Shape kept = kernels::reduced_shape(x.shape(), reduce_dims, true);
    Tensor out_kept = keepdim ? c.out() : reshape(c.out(), kept);
    Tensor g_kept = keepdim ? g : reshape(g, kept);
    return {mul(g_kept, exp(sub(x, out_kept)))};  // softmax(x) = exp(x - logsumexp(x))
  }, SavedOutput::yes);
}

static Sample lse_sample(Shape shape, Shape dims, bool keepdim, std::string label) {
  return {{{std::move(shape)}},
          [dims, keepdim](const OpArgs& x) { return logsumexp(x[0], dims, keepdim); },
          std::move(label),
          [dims, keepdim](const OpArgs& x) { return log(sum(exp(x[0]), dims, keepdim)); }};
}

LOOM_OP(logsumexp){
    .name = "logsumexp",
    .call = [](const OpArgs& x) { return logsumexp(x[0]); },
    .samples = {lse_sample({4, 7}, {}, false, "all"),
                lse_sample({4, 7}, {1}, false, "dims={1}"),
                lse_sample({4, 7}, {0}, true, "dims={0} keepdim"),
                lse_sample({2, 3, 5}, {0, 2}, false, "dims={0,2}"),
                lse_sample({2, 3, 5}, {-1}, true, "dims={-1} keepdim")},
};

}  // namespace loom
