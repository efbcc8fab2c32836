// sgd_step_(w, g, buf): one SGD update of a parameter, in place (loom/ops/updates.h).
//   d = g + wd w;  with momentum: buf = first ? d : mu buf + (1 - dampening) d,
//   d = nesterov ? d + mu buf : buf;   w -= lr d
// Not differentiable: it runs under a NoGradGuard after backward. CPU kernels:
// ops/cpu/updates.cpp. Checked against torch.optim's trajectories in test_optim.
#include "update_checks.h"

namespace loom {

void sgd_step_(const Tensor& w, const Tensor& grad, const Tensor& momentum_buffer, const SgdStep& step) {
  LOOM_CHECK(momentum_buffer.defined() == (step.momentum > 0.0),
             "sgd_step_: a momentum buffer is needed exactly when momentum > 0 (momentum {})", step.momentum);
  detail::check_update_operands("sgd_step_", w, {grad, momentum_buffer});
  WholeKernels whole;  // never half a step
  detail::kernel_for<kernels::SgdStepKernel>("sgd_step_", w)(w, grad, momentum_buffer, step);
  w.storage()->bump_version();
  if (momentum_buffer.defined()) momentum_buffer.storage()->bump_version();
}

// The matrix sees a functional form: fresh copies updated, returned stacked.
static OpCall sgd_stepped(SgdStep step) {
  return [step](const OpArgs& x) {
    NoGradGuard no_grad;
    Tensor w = clone(x[0]), buf = step.momentum > 0.0 ? clone(x[2]) : Tensor();
    sgd_step_(w, x[1], buf, step);
    return buf.defined() ? stack({w, buf}) : w;
  };
}

LOOM_OP(sgd_step_){
    .name = "sgd_step_",
    .formula =
        "d = g + wd·w;  buf = μ·buf + (1-dampening)·d (d on the first step);  "
        "d = nesterov ? d + μ·buf : buf;  w -= lr·d",
    .derivative = "none: an in-place optimizer update (runs after backward, under NoGradGuard)",
    .shape_rule = "w, g, buf: one shape; updated in place",
    .call = sgd_stepped({.lr = 0.1, .weight_decay = 0.01}),
    .samples =
        {{{{{4, 7}}, {{4, 7}}, {{4, 7}}}, {}, "plain, weight decay"},
         {{{{3, 5}}, {{3, 5}}, {{3, 5}}}, sgd_stepped({.lr = 0.1, .momentum = 0.9, .dampening = 0.1}), "momentum"},
         {{{{3, 5}}, {{3, 5}}, {{3, 5}}}, sgd_stepped({.lr = 0.1, .momentum = 0.9, .first = true}), "first step"},
         {{{{3, 5}}, {{3, 5}}, {{3, 5}}}, sgd_stepped({.lr = 0.1, .momentum = 0.9, .nesterov = true}), "Nesterov"}},
    .differentiable = false,
    .variants = false,
    .note = "an in-place update of contiguous parameters: no gradient, no strided or broadcast operands",
};

}  // namespace loom
