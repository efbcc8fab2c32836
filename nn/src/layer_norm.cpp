#include <cmath>

#include "loom/nn/layers.h"
#include "loom/ops.h"

namespace loom::nn {

LayerNorm::LayerNorm(int64_t dim, double eps, TensorOptions options) : eps_(eps) {
  LOOM_CHECK(dim > 0, "LayerNorm: dim must be positive, got {}", dim);
  LOOM_CHECK(eps >= 0 && std::isfinite(eps), "LayerNorm: eps must be a finite number >= 0, got {}", eps);
  register_parameter("weight", weight, ones({dim}, options));
  register_parameter("bias", bias, zeros({dim}, options));
}

Tensor LayerNorm::forward(const Tensor& x) const {
  return layer_norm(x, as_activation_dtype(weight, x), as_activation_dtype(bias, x), eps_);
}

}  // namespace loom::nn
