// adam_steps_(ws, gs, ms, vs, steps): adam_step_ over a list of parameters in one kernel,
// parameter k with steps[k] (its own update count's bias corrections). On a GPU that is
// one launch per few dozen parameters instead of one each (PyTorch's fused Adam); the
// arithmetic is adam_step_'s element by element, so the bits are the same.
// CPU kernels: ops/cpu/updates.cpp.
#include <cmath>

#include "update_checks.h"

namespace loom {

void adam_steps_(const std::vector<Tensor>& w, const std::vector<Tensor>& grad, const std::vector<Tensor>& m,
                 const std::vector<Tensor>& v, const std::vector<AdamStep>& steps) {
  LOOM_CHECK(grad.size() == w.size() && m.size() == w.size() && v.size() == w.size() && steps.size() == w.size(),
             "adam_steps_: {} parameters, {} gradients, {} and {} moments, {} steps: one of each per parameter",
             w.size(), grad.size(), m.size(), v.size(), steps.size());
  if (w.empty()) return;
  for (size_t k = 0; k < w.size(); ++k) {
    detail::check_update_operands("adam_steps_", w[k], {grad[k], m[k], v[k]});
    detail::check_same_kind("adam_steps_", w[0], w[k]);
    LOOM_CHECK(steps[k].beta1 == steps[0].beta1 && steps[k].beta2 == steps[0].beta2 && steps[k].eps == steps[0].eps,
               "adam_steps_: parameter {} has other betas or eps than parameter 0", k);
  }
  WholeKernels whole;  // never half a step
  detail::kernel_for<kernels::AdamStepsKernel>("adam_steps_", w[0])(w, grad, m, v, steps);
  for (const std::vector<Tensor>* updated : {&w, &m, &v})
    for (const Tensor& t : *updated) t.storage()->bump_version();
}

namespace {
// The matrix sees a functional form: fresh copies of two or three parameters' (w, g, m, v)
// updated, every element of each w, m and v flattened and joined.
Tensor stepped(const OpArgs& x, bool one_by_one) {
  NoGradGuard no_grad;
  std::vector<Tensor> w, g, m, v;
  std::vector<AdamStep> steps;
  for (size_t k = 0; k + 3 < x.size(); k += 4) {
    w.push_back(clone(x[k])), g.push_back(x[k + 1]), m.push_back(clone(x[k + 2])), v.push_back(abs(x[k + 3]));
    const double t = static_cast<double>(k / 4 + 1);  // each parameter at its own update count
    steps.push_back({.step_size = 0.1 / (1 - std::pow(0.9, t)),
                     .root_correction2 = std::sqrt(1 - std::pow(0.999, t)),
                     .shrink = 0.99});
  }
  if (one_by_one)
    for (size_t k = 0; k < w.size(); ++k) adam_step_(w[k], g[k], m[k], v[k], steps[k]);
  else
    adam_steps_(w, g, m, v, steps);
  std::vector<Tensor> flat;
  for (const std::vector<Tensor>* list : {&w, &m, &v})
    for (const Tensor& t : *list) flat.push_back(reshape(t, {-1}));
  return cat(flat, 0);
}

Sample parameters(std::vector<Shape> shapes, std::string label) {
  Sample sample{.label = std::move(label)};
  for (const Shape& shape : shapes)
    for (int i = 0; i < 4; ++i) sample.inputs.push_back({shape});
  return sample;
}
}  // namespace

LOOM_OP(adam_steps_){
    .name = "adam_steps_",
    .formula = "adam_step_(w_k, g_k, m_k, v_k, steps_k) for every parameter k, in one kernel",
    .derivative = "none: an in-place optimizer update (runs after backward, under NoGradGuard)",
    .shape_rule = "per parameter: w, g, m, v of one shape; updated in place",
    .call = [](const OpArgs& x) { return stepped(x, false); },
    .samples = {parameters({{4, 7}, {7}}, "a matrix and a bias"),
                parameters({{3, 5}, {1}, {2, 2, 3}}, "three, one of one element")},
    .composed = [](const OpArgs& x) { return stepped(x, true); },
    .differentiable = false,
    .variants = false,
    .note = "an in-place update of contiguous parameters: no gradient, no strided or broadcast operands",
};

}  // namespace loom
