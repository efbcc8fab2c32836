// var(x, dims, keepdim, correction) = sum((x - mean)^2) / (N - correction)
//   (N = elements per output; correction = 1: unbiased, 0: population)
//   dx = g * 2 (x - mean) / (N - correction)
// Two passes (mean first, then squared deviations): one-pass sum(x^2) - N mean^2
// cancels catastrophically when |mean| >> std. The backward is written with ops
// (mean, sub, mul), so it differentiates again.
#include "elementwise.h"
#include "loom/kernels/reduce.h"

namespace loom {

namespace {
template <typename T>
struct SquareSumReducer {
  using Acc = double;
  Acc init() const { return 0; }
  void add(Acc& acc, T v) const { acc += static_cast<double>(v) * v; }
  void merge(Acc& acc, const Acc& other) const { acc += other; }
  void add_span(Acc& acc, const T* p, int64_t n) const { kernels::add_span_lanes(*this, acc, p, n); }
  T finish(const Acc& acc, int64_t) const { return static_cast<T>(acc); }
};

// For each output: its mean, then the sum of squared deviations, in index order.
template <typename T>
void reference_var(const Tensor& out, const Tensor& x, const Shape& dims, double divisor) {
  kernels::reference_reduce_each<T>(out, x, dims, [divisor](auto at, int64_t count) {
    double mean = 0;
    for (int64_t j = 0; j < count; ++j) mean += at(j);
    mean /= static_cast<double>(count);
    double squares = 0;
    for (int64_t j = 0; j < count; ++j) squares += (at(j) - mean) * (at(j) - mean);
    return squares / divisor;
  });
}
}  // namespace

Tensor var(const Tensor& x, const Shape& dims, bool keepdim, int64_t correction, Where where) {
  CallSite site(where);
  detail::require_cpu("var", x);
  LOOM_CHECK(is_floating(x.dtype()), "var: expected a floating dtype, got {}", dtype_name(x.dtype()));
  Shape reduce_dims = kernels::normalize_dims(dims, x.dim(), "var");
  int64_t count = 1;
  for (int64_t d : reduce_dims) count *= x.shape()[d];
  // As in PyTorch: N <= correction divides by zero (inf or nan), it is not an error.
  double divisor = static_cast<double>(std::max<int64_t>(0, count - correction));
  Shape kept = kernels::reduced_shape(x.shape(), reduce_dims, true);
  Shape out_shape = kernels::reduced_shape(x.shape(), reduce_dims, keepdim);
  Tensor out;
  if (kernel_mode() == KernelMode::reference) {
    out = Tensor::empty(out_shape, {x.dtype(), x.device()});
    dispatch_floating(x.dtype(), "var", [&](auto tag) { reference_var<typename decltype(tag)::type>(out, x, reduce_dims, divisor); });
  } else {
    NoGradGuard kernel_internals;
    // Pass 1: means (reduction engine); pass 2: squares of the centred values.
    Tensor centred = sub(x, mean(x, reduce_dims, true));
    Tensor squares = Tensor::empty(kept, {x.dtype(), x.device()});
    dispatch_floating(x.dtype(), "var", [&](auto tag) {
      using T = typename decltype(tag)::type;
      kernels::reduce_loop<T, T>(squares, centred, reduce_dims, SquareSumReducer<T>{});
    });
    out = reshape(div(squares, scalar_tensor(divisor, {x.dtype(), x.device()})), out_shape);
  }
  return record("var", {x}, out, [x, reduce_dims, keepdim, kept, divisor](BackwardContext&, const Tensor& g) -> detail::Grads {
    Tensor centred = sub(x, mean(x, reduce_dims, true));
    Tensor scale = scalar_tensor(2.0 / divisor, {x.dtype(), x.device()});
    return {mul(keepdim ? g : reshape(g, kept), mul(centred, scale))};
  });
}

static Sample var_sample(Shape shape, Shape dims, bool keepdim, int64_t correction, std::string label) {
  return {{{std::move(shape)}},
          [=](const OpArgs& x) { return var(x[0], dims, keepdim, correction); },
          std::move(label),
          [=](const OpArgs& x) {
            Shape d = kernels::normalize_dims(dims, x[0].dim(), "var");
            int64_t n = 1;
            for (int64_t i : d) n *= x[0].shape()[i];
            Tensor centred = x[0] - mean(x[0], dims, true);
            return sum(centred * centred, dims, keepdim) / static_cast<double>(n - correction);
          }};
}

LOOM_OP(var){
    .name = "var",
    .call = [](const OpArgs& x) { return var(x[0]); },
    .samples = {var_sample({4, 7}, {}, false, 1, "all"),
                var_sample({4, 7}, {1}, false, 1, "dims={1}"),
                var_sample({4, 7}, {0}, true, 1, "dims={0} keepdim"),
                var_sample({2, 3, 5}, {0, 2}, false, 0, "dims={0,2} correction=0"),
                var_sample({2, 3, 5}, {-1}, true, 2, "dims={-1} keepdim correction=2")},
};

}  // namespace loom
