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
  // Each gradient's squares summed in float64 on its device, the sums added there in
  // parameter order: one number comes back at the end, not one per parameter (a GPU
  // waits once), and the bits are those of adding them on the host.
  Tensor total;
  for (const Tensor& p : params) {
    Tensor g = p.grad();
    if (!g.defined()) continue;
    LOOM_CHECK(is_floating(g.dtype()), "grad_norm: gradient of shape {} must be float, got {}", g.shape(),
               dtype_name(g.dtype()));
    Tensor g64 = to_dtype(g.detach(), DType::f64);
    Tensor squares = sum(mul(g64, g64));
    total = total.defined() ? add(total, squares.to(total.device())) : squares;
  }
  return total.defined() ? std::sqrt(total.to(kCPU).item<double>()) : 0.0;
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
