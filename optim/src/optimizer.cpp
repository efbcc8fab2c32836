#include "loom/optim/optimizer.h"

#include "loom/autograd.h"
#include "loom/error.h"
#include "loom/kernel_table.h"

namespace loom::optim {

Optimizer::Optimizer(std::vector<Tensor> params, double lr) : params_(std::move(params)), lr_(lr) {
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor& p = params_[i];
    LOOM_CHECK(p.defined() && p.is_leaf() && p.requires_grad(),
               "optimizer: parameter {} must be a leaf tensor that requires grad", i);
    LOOM_CHECK(supports("adam_step_", p.device(), p.dtype()),
               "optimizer: parameter {} (shape {}) is on {}, which has no update kernels", i, p.shape(), p.device());
    LOOM_CHECK(is_floating(p.dtype()) && p.is_contiguous(),
               "optimizer: parameter {} (shape {}) must be contiguous float32 or float64, got {}", i, p.shape(),
               dtype_name(p.dtype()));
  }
  set_lr(lr);
}

void Optimizer::set_lr(double lr) {
  LOOM_CHECK(lr >= 0.0, "optimizer: learning rate must be >= 0, got {}", lr);
  lr_ = lr;
}

void Optimizer::zero_grad() {
  for (const Tensor& p : params_) p.set_grad(Tensor());
}

bool Optimizer::gradient_of(size_t index, const char* optimizer, Tensor& grad) const {
  const Tensor& p = params_[index];
  grad = p.grad();
  if (!grad.defined()) return false;
  LOOM_CHECK(grad.shape() == p.shape() && grad.dtype() == p.dtype() && grad.is_contiguous(),
             "{}: the gradient of parameter {} is {} {} but the parameter is {} {}", optimizer, index,
             dtype_name(grad.dtype()), grad.shape(), dtype_name(p.dtype()), p.shape());
  return true;
}

}  // namespace loom::optim
