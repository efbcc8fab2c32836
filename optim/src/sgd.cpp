#include "loom/autograd.h"
#include "loom/error.h"
#include "loom/ops.h"
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
    NoGradGuard no_grad;
    sgd_step_(p, grad, o.momentum > 0.0 ? momentum_[k] : Tensor(),
              {.lr = lr_,
               .weight_decay = o.weight_decay,
               .momentum = o.momentum,
               .dampening = o.dampening,
               .nesterov = o.nesterov,
               .first = first});
  }
  ++steps_;
}

}  // namespace loom::optim
