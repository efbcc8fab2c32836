// amax(x, dims, keepdim) = max of x over dims
//   dx = g * [x == amax] / (number of maxima)     (ties share the gradient evenly,
//   as torch.amax does; samples draw distinct values so no tie sits near a sample)
// The tie weights [x == amax] / count are piecewise constant in x, so the backward
// is linear in g with constant weights and differentiates again without more code.
#include <cmath>
#include <limits>

#include "elementwise.h"
#include "loom/kernels/reduce.h"

namespace loom {

namespace {
template <typename T>
struct MaxReducer {
  using Acc = T;
  Acc init() const {
    if constexpr (std::numeric_limits<T>::has_infinity) return -std::numeric_limits<T>::infinity();
    else return std::numeric_limits<T>::lowest();
  }
  // NaN wins (v != v) and then stays: max propagates NaN like PyTorch.
  void add(Acc& acc, T v) const { acc = (v > acc || v != v) ? v : acc; }
  void merge(Acc& acc, const Acc& other) const { add(acc, other); }
  void add_span(Acc& acc, const T* p, int64_t n) const { kernels::add_span_lanes(*this, acc, p, n); }
  T finish(const Acc& acc, int64_t) const { return acc; }
};


Tensor amax_kernel(const Tensor& x, const Shape& dims, bool keepdim) {
  detail::require_cpu("amax", x);
  for (int64_t d : dims)
    LOOM_CHECK(x.shape()[d] > 0, "amax: cannot reduce over dim {} of size 0 (shape {})", d, x.shape());
  Tensor out = Tensor::empty(kernels::reduced_shape(x.shape(), dims, keepdim), {x.dtype(), x.device()});
  dispatch_numeric(x.dtype(), "amax", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (kernel_mode() == KernelMode::reference) kernels::reference_reduce<T, T>(out, x, dims, MaxReducer<T>{});
    else kernels::reduce_loop<T, T>(out, x, dims, MaxReducer<T>{});
  });
  return out;
}
}  // namespace

Tensor amax(const Tensor& x, const Shape& dims, bool keepdim, Where where) {
  CallSite site(where);
  Shape reduce_dims = kernels::normalize_dims(dims, x.dim(), "amax");
  Tensor out = amax_kernel(x, reduce_dims, keepdim);
  return record("amax", {x}, out, [x, reduce_dims, keepdim](BackwardContext& c, const Tensor& g) -> detail::Grads {
    Shape kept = kernels::reduced_shape(x.shape(), reduce_dims, true);
    Tensor weights;
    {
      NoGradGuard constant;  // where the maxima are: piecewise constant in x
      Tensor mask = to_dtype(eq(x, reshape(c.out().detach(), kept)), x.dtype());
      weights = div(mask, sum(mask, reduce_dims, true));
    }
    return {mul(expand(keepdim ? g : reshape(g, kept), x.shape()), weights)};
  }, SavedOutput::yes);
}

static OpCall amax_over(Shape dims, bool keepdim) {
  return [dims, keepdim](const OpArgs& x) { return amax(x[0], dims, keepdim); };
}

LOOM_OP(amax){
    .name = "amax",
    .call = [](const OpArgs& x) { return amax(x[0]); },
    .samples = {unary_sample({4, 7}, Domain::any, "all"),
                {{{{4, 7}}}, amax_over({1}, false), "dims={1}"},
                {{{{4, 7}}}, amax_over({0}, true), "dims={0} keepdim"},
                {{{{2, 3, 5}}}, amax_over({0, 2}, false), "dims={0,2}"},
                {{{{2, 3, 5}}}, amax_over({-1}, true), "dims={-1} keepdim"}},
};

}  // namespace loom
