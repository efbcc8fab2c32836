#include <cmath>

#include "elementwise.h"
#include "loom/error.h"
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
  for (size_t k = 0; k < params_.size(); ++k) {
    Tensor grad;
    if (!gradient_of(k, "Adam", grad)) continue;
    Tensor& p = params_[k];
    if (!m_[k].defined()) {
      m_[k] = detail::zeros_like_param(p);
      v_[k] = detail::zeros_like_param(p);
    }
    const int64_t t = ++updates_[k];
    const double step_size = lr_ / (1.0 - std::pow(b1, static_cast<double>(t)));
    const double root_correction2 = std::sqrt(1.0 - std::pow(b2, static_cast<double>(t)));
    const double decay = options_.decoupled_weight_decay ? 1.0 - lr_ * options_.weight_decay : 1.0;
    const double l2 = options_.decoupled_weight_decay ? 0.0 : options_.weight_decay;
    dispatch_floating(p.dtype(), "Adam", [&](auto tag) {
      using T = typename decltype(tag)::type;
      T* w = p.data<T>();
      const T* g = grad.data<T>();
      T* m = m_[k].data<T>();
      T* v = v_[k].data<T>();
      const T beta1 = static_cast<T>(b1), beta2 = static_cast<T>(b2), eps = static_cast<T>(options_.eps);
      const T step = static_cast<T>(step_size), root_c2 = static_cast<T>(root_correction2);
      const T shrink = static_cast<T>(decay), wd = static_cast<T>(l2);
      detail::for_each_element(p.numel(), [&](int64_t i) {
        const T gi = g[i] + wd * w[i];
        m[i] = beta1 * m[i] + (T(1) - beta1) * gi;
        v[i] = beta2 * v[i] + (T(1) - beta2) * gi * gi;
        w[i] = shrink * w[i] - step * m[i] / (std::sqrt(v[i]) / root_c2 + eps);
      });
    });
    p.storage()->bump_version();
  }
  ++steps_;
}

}  // namespace loom::optim
