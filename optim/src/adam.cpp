#include <algorithm>
#include <cmath>

#include "loom/autograd.h"
#include "loom/error.h"
#include "loom/ops.h"
#include "loom/optim/optimizer.h"

namespace loom::optim {

Adam::Adam(std::vector<Tensor> params, AdamOptions options)
    : Optimizer(std::move(params), options.lr),
      options_(options),
      m_(params_.size()),
      v_(params_.size()),
      updates_(params_.size(), 0) {
  const auto [b1, b2] = options.betas;
  LOOM_CHECK(b1 >= 0.0 && b1 < 1.0 && b2 >= 0.0 && b2 < 1.0, "Adam: betas must be in [0, 1), got ({}, {})", b1, b2);
  LOOM_CHECK(options.eps >= 0.0, "Adam: eps must be >= 0, got {}", options.eps);
  LOOM_CHECK(options.weight_decay >= 0.0, "Adam: weight_decay must be >= 0, got {}", options.weight_decay);
}

void Adam::step() {
  const auto [b1, b2] = options_.betas;
  // Every parameter with a gradient in one adam_steps_ (one kernel; a few launches on a
  // GPU), or one by one where they differ in device or dtype: the same bits either way.
  std::vector<Tensor> w, g, m, v;
  std::vector<AdamStep> steps;
  for (size_t k = 0; k < params_.size(); ++k) {
    Tensor grad;
    if (!gradient_of(k, "Adam", grad)) continue;
    Tensor& p = params_[k];
    if (!m_[k].defined()) {
      m_[k] = zeros_like(p.detach());
      v_[k] = zeros_like(p.detach());
    }
    const int64_t t = ++updates_[k];
    const double decay = options_.decoupled_weight_decay ? 1.0 - lr_ * options_.weight_decay : 1.0;
    steps.push_back({.beta1 = b1,
                     .beta2 = b2,
                     .eps = options_.eps,
                     .step_size = lr_ / (1.0 - std::pow(b1, static_cast<double>(t))),
                     .root_correction2 = std::sqrt(1.0 - std::pow(b2, static_cast<double>(t))),
                     .shrink = decay,
                     .l2 = options_.decoupled_weight_decay ? 0.0 : options_.weight_decay});
    w.push_back(p), g.push_back(grad), m.push_back(m_[k]), v.push_back(v_[k]);
  }
  NoGradGuard no_grad;
  const bool alike = std::all_of(w.begin(), w.end(), [&](const Tensor& p) {
    return p.device() == w.front().device() && p.dtype() == w.front().dtype();
  });
  if (alike)
    adam_steps_(w, g, m, v, steps);
  else
    for (size_t k = 0; k < w.size(); ++k) adam_step_(w[k], g[k], m[k], v[k], steps[k]);
  ++steps_;
}

void Adam::load_state(std::vector<Tensor> first, std::vector<Tensor> second, std::vector<int64_t> counts,
                      int64_t steps) {
  const size_t n = params_.size();
  LOOM_CHECK(first.size() == n && second.size() == n && counts.size() == n,
             "Adam: a state of {}, {} and {} entries for {} parameters", first.size(), second.size(), counts.size(), n);
  LOOM_CHECK(steps >= 0, "Adam: the step count must be >= 0, got {}", steps);
  for (size_t k = 0; k < n; ++k) {
    const Tensor& p = params_[k];
    LOOM_CHECK(counts[k] >= 0, "Adam: parameter {}: update count {} is negative", k, counts[k]);
    const bool updated = counts[k] > 0;
    for (const Tensor* moment : {&first[k], &second[k]}) {
      LOOM_CHECK(moment->defined() == updated, "Adam: parameter {} has {} update(s) but {} moment", k, counts[k],
                 moment->defined() ? "a" : "no");
      if (updated)
        LOOM_CHECK(moment->shape() == p.shape() && moment->dtype() == p.dtype(),
                   "Adam: a moment of parameter {} is {} {} but the parameter is {} {}", k, dtype_name(moment->dtype()),
                   moment->shape(), dtype_name(p.dtype()), p.shape());
    }
  }
  for (size_t k = 0; k < n; ++k) {
    // Own copies on the parameter's device: the caller's tensors may share a file's buffer.
    m_[k] = first[k].defined() ? first[k].detach().to(params_[k].device()).clone() : Tensor();
    v_[k] = second[k].defined() ? second[k].detach().to(params_[k].device()).clone() : Tensor();
  }
  updates_ = std::move(counts);
  steps_ = steps;
}

}  // namespace loom::optim
