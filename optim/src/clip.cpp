#include <algorithm>
#include <cmath>
#include <vector>

#include "loom/autograd.h"
#include "loom/ops.h"
#include "loom/error.h"
#include "loom/optim/optimizer.h"

namespace loom::optim {

Tensor grad_norm_on_device(const std::vector<Tensor>& params) {
  NoGradGuard no_grad;
  // Each gradient's squares summed in float64 on its device, the sums added there in
  // parameter order: the bits of adding them on the host, and nothing read back.
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
  return total.defined() ? sqrt(total) : Tensor();  // IEEE's sqrt: std::sqrt's bits
}

double grad_norm(const std::vector<Tensor>& params) {
  const Tensor norm = grad_norm_on_device(params);  // one wait, not one per parameter
  return norm.defined() ? norm.to(kCPU).item<double>() : 0.0;
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

Tensor clip_grad_norm_on_device(const std::vector<Tensor>& params, double max_norm) {
  LOOM_CHECK(max_norm > 0.0, "clip_grad_norm: max_norm must be positive, got {}", max_norm);
  const Tensor norm = grad_norm_on_device(params);
  if (!norm.defined()) return norm;
  NoGradGuard no_grad;
  // clip_grad_norm's rule on the device: max_norm / (norm + 1e-6) where the norm
  // exceeds max_norm, else 1 (x * 1 is x: unclipped gradients keep their bits; a NaN
  // norm compares false and passes through). The factor is computed in float64 and
  // rounded once to the gradients' dtype, as the host's double is.
  const TensorOptions f64{DType::f64, norm.device()};
  const Tensor limit = scalar_tensor(max_norm, f64);
  const Tensor factor =
      where(gt(norm, limit), div(limit, add(norm, scalar_tensor(1e-6, f64))), scalar_tensor(1.0, f64));
  for (const Tensor& p : params) {
    Tensor g = p.grad();
    if (!g.defined()) continue;
    copy_(g, mul(g, to_dtype(factor.to(g.device()), g.dtype())));
  }
  return norm;
}

}  // namespace loom::optim
