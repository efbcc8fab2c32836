#pragma once
// In-place parameter updates: the optimizers' inner loops as fused ops with a
// kernel per device (optim/ calls them; no update touches memory on the host).
#include <vector>

#include "loom/tensor.h"

namespace loom {

// The scalars of one Adam step of one parameter (optim::Adam computes them).
struct AdamStep {
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  double step_size = 0;         // lr / (1 - beta1^t)
  double root_correction2 = 1;  // sqrt(1 - beta2^t)
  double shrink = 1;            // 1 - lr * weight_decay (AdamW), else 1
  double l2 = 0;                // weight_decay added to the gradient (Adam), else 0
};
// g' = g + l2 w;  m = b1 m + (1 - b1) g';  v = b2 v + (1 - b2) g'^2;
// w = shrink w - step_size m / (sqrt(v) / root_correction2 + eps). w, m, v in place.
void adam_step_(const Tensor& w, const Tensor& grad, const Tensor& m, const Tensor& v, const AdamStep& step);
// adam_step_ of every parameter k with steps[k], in one kernel (one launch per few dozen
// parameters on a GPU, as PyTorch's fused Adam): the same arithmetic element by element,
// so the same bits. All of one dtype and device; betas and eps the same for all.
void adam_steps_(const std::vector<Tensor>& w, const std::vector<Tensor>& grad, const std::vector<Tensor>& m,
                 const std::vector<Tensor>& v, const std::vector<AdamStep>& steps);

struct SgdStep {
  double lr = 0, weight_decay = 0, momentum = 0, dampening = 0;
  bool nesterov = false;
  bool first = false;  // the momentum buffer's first step: buf = d
};
// d = g + weight_decay w; with momentum: buf = first ? d : momentum buf + (1 - dampening) d,
// d = nesterov ? d + momentum buf : buf;  w -= lr d. momentum_buffer is undefined without momentum.
void sgd_step_(const Tensor& w, const Tensor& grad, const Tensor& momentum_buffer, const SgdStep& step);

}  // namespace loom
