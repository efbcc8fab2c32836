#include <algorithm>
#include <cmath>
#include <vector>

#include "elementwise.h"
#include "loom/error.h"
#include "loom/optim/optimizer.h"

namespace loom::optim {

namespace {
// sum of g^2 over one gradient: float64 partial sums of fixed 4096-element
// blocks (in parallel), then added in block order.
template <typename T>
double sum_of_squares(const T* g, int64_t n) {
  constexpr int64_t kBlock = 4096;
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  std::vector<double> partial(static_cast<size_t>(blocks));
#pragma omp parallel for schedule(static) if (n >= detail::kParallelGrain && !omp_in_parallel())
  for (int64_t b = 0; b < blocks; ++b) {
    double s = 0;
    const int64_t end = std::min(n, (b + 1) * kBlock);
    for (int64_t i = b * kBlock; i < end; ++i) s += static_cast<double>(g[i]) * static_cast<double>(g[i]);
    partial[b] = s;
  }
  double total = 0;
  for (double s : partial) total += s;
  return total;
}
}  // namespace

double grad_norm(const std::vector<Tensor>& params) {
  double total = 0;
  for (const Tensor& p : params) {
    Tensor g = p.grad();
    if (!g.defined()) continue;
    LOOM_CHECK(g.device().is_cpu() && g.is_contiguous() && is_floating(g.dtype()),
               "grad_norm: gradient of shape {} must be a contiguous float tensor on the CPU", g.shape());
    total += dispatch_floating(g.dtype(), "grad_norm",
                               [&](auto tag) { return sum_of_squares(g.data<typename decltype(tag)::type>(), g.numel()); });
  }
  return std::sqrt(total);
}

double clip_grad_norm(const std::vector<Tensor>& params, double max_norm) {
  LOOM_CHECK(max_norm > 0.0, "clip_grad_norm: max_norm must be positive, got {}", max_norm);
  const double norm = grad_norm(params);
  if (!(norm > max_norm)) return norm;  // NaN norms pass through unscaled, as in PyTorch
  const double scale = max_norm / (norm + 1e-6);
  for (const Tensor& p : params) {
    Tensor g = p.grad();
    if (!g.defined()) continue;
    dispatch_floating(g.dtype(), "clip_grad_norm", [&](auto tag) {
      using T = typename decltype(tag)::type;
      T* d = g.data<T>();
      const T s = static_cast<T>(scale);
      detail::for_each_element(g.numel(), [&](int64_t i) { d[i] *= s; });
    });
    g.storage()->bump_version();
  }
  return norm;
}

}  // namespace loom::optim
