// adam_step_(w, g, m, v): one Adam/AdamW update of a parameter, in place (loom/ops/updates.h).
//   g' = g + l2 w,  m = b1 m + (1 - b1) g',  v = b2 v + (1 - b2) g'^2,
//   w = shrink w - step_size m / (sqrt(v) / sqrt(1 - b2^t) + eps)
// Not differentiable: it runs under a NoGradGuard after backward. CPU kernels:
// ops/cpu/updates.cpp. Checked against torch.optim's trajectories in test_optim.
#include "update_checks.h"

namespace loom {

void adam_step_(const Tensor& w, const Tensor& grad, const Tensor& m, const Tensor& v, const AdamStep& step) {
  detail::check_update_operands("adam_step_", w, {grad, m, v});
  WholeKernels whole;  // never half a step
  detail::kernel_for<kernels::AdamStepKernel>("adam_step_", w)(w, grad, m, v, step);
  for (const Tensor& t : {w, m, v}) t.storage()->bump_version();
}

// The matrix sees a functional form: fresh copies updated, returned stacked.
static Tensor adam_stepped(const OpArgs& x, AdamStep step) {
  NoGradGuard no_grad;
  Tensor w = clone(x[0]), m = clone(x[2]), v = abs(x[3]);  // v >= 0, as a second moment is
  adam_step_(w, x[1], m, v, step);
  return stack({w, m, v});
}

LOOM_OP(adam_step_){
    .name = "adam_step_",
    .formula =
        "g' = g + l2·w;  m = β1·m + (1-β1)·g';  v = β2·v + (1-β2)·g'²;  "
        "w = shrink·w - step_size·m / (√v/√(1-β2^t) + ε)",
    .derivative = "none: an in-place optimizer update (runs after backward, under NoGradGuard)",
    .shape_rule = "w, g, m, v: one shape; updated in place",
    .call = [](const OpArgs& x) { return adam_stepped(x, {.step_size = 0.1, .root_correction2 = 0.3}); },
    .samples = {{{{{4, 7}}, {{4, 7}}, {{4, 7}}, {{4, 7}}}, {}, "Adam"},
                {{{{3, 5}}, {{3, 5}}, {{3, 5}}, {{3, 5}}},
                 [](const OpArgs& x) { return adam_stepped(x, {.step_size = 0.1, .shrink = 0.99}); },
                 "AdamW"},
                {{{{3, 5}}, {{3, 5}}, {{3, 5}}, {{3, 5}}},
                 [](const OpArgs& x) { return adam_stepped(x, {.step_size = 0.1, .l2 = 0.01}); },
                 "Adam + L2"}},
    .differentiable = false,
    .variants = false,
    .note = "an in-place update of contiguous parameters: no gradient, no strided or broadcast operands",
};

}  // namespace loom
