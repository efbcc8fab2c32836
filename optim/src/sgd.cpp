#include "elementwise.h"
#include "loom/error.h"
#include "loom/optim/optimizer.h"

namespace loom::optim {

SGD::SGD(std::vector<Tensor> params, SGDOptions options)
    : Optimizer(std::move(params), options.lr), options_(options), momentum_(params_.size()) {
  LOOM_CHECK(options.momentum >= 0.0, "SGD: momentum must be >= 0, got {}", options.momentum);
  LOOM_CHECK(!options.nesterov || (options.momentum > 0.0 && options.dampening == 0.0),
             "SGD: Nesterov momentum needs momentum > 0 and dampening 0");
}

void SGD::step() {
  const SGDOptions& o = options_;
  for (size_t k = 0; k < params_.size(); ++k) {
    Tensor grad;
    if (!gradient_of(k, "SGD", grad)) continue;
    Tensor& p = params_[k];
    const bool first = !momentum_[k].defined();
    if (o.momentum > 0.0 && first) momentum_[k] = Tensor::empty(p.shape(), {p.dtype(), p.device()});
    dispatch_floating(p.dtype(), "SGD", [&](auto tag) {
      using T = typename decltype(tag)::type;
      T* w = p.data<T>();
      const T* g = grad.data<T>();
      T* buf = o.momentum > 0.0 ? momentum_[k].data<T>() : nullptr;
      const T lr = static_cast<T>(lr_), wd = static_cast<T>(o.weight_decay), mu = static_cast<T>(o.momentum);
      const T keep = static_cast<T>(1.0 - o.dampening);
      detail::for_each_element(p.numel(), [&](int64_t i) {
        T d = g[i] + wd * w[i];
        if (buf) {
          buf[i] = first ? d : mu * buf[i] + keep * d;
          d = o.nesterov ? d + mu * buf[i] : buf[i];
        }
        w[i] -= lr * d;
      });
    });
    p.storage()->bump_version();
  }
  ++steps_;
}

}  // namespace loom::optim
