#include <algorithm>
#include <cmath>
#include <vector>

#include "loom/autograd.h"
#include "loom/ops.h"
#include "loom/error.h"
#include "loom/optim/optimizer.h"

namespace loom::optim {

double grad_norm(const std::vector<Tensor>& params) {
  NoGradGuard no_grad;
  double total = 0;
  for (const Tensor& p : params) {
    Tensor g = p.grad();
    if (!g.defined()) continue;
    LOOM_CHECK(is_floating(g.dtype()), "grad_norm: gradient of shape {} must be float, got {}", g.shape(),
               dtype_name(g.dtype()));
    // The squares summed in float64 on the gradient's device; one number comes back.
    Tensor g64 = to_dtype(g.detach(), DType::f64);
    total += sum(mul(g64, g64)).to(kCPU).item<double>();
  }
  return std::sqrt(total);
}

double clip_grad_norm(const std::vector<Tensor>& params, double max_norm) {
  LOOM_CHECK(max_norm > 0.0, "clip_grad_norm: max_norm must be positive, got {}", max_norm);
  const double norm = grad_norm(params);
  if (!(norm > max_norm)) return norm;  // NaN norms pass through unscaled, as in PyTorch
  const double scale = max_norm / (norm + 1e-6);
  NoGradGuard no_grad;
  for (const Tensor& p : params) {
    Tensor g = p.grad();
    if (!g.defined()) continue;
    copy_(g, mul(g, scalar_tensor(scale, {g.dtype(), g.device()})));
  }
  return norm;
}

}  // namespace loom::optim
