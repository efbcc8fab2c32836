#include "loom/nn/layers.h"
#include "loom/ops.h"

namespace loom::nn {

Dropout::Dropout(double p, Generator& gen) : p_(p), gen_(&gen) {
  LOOM_CHECK(p >= 0.0 && p < 1.0, "Dropout: p must be in [0, 1), got {}", p);
}

Tensor Dropout::forward(const Tensor& x) const { return dropout(x, p_, is_training(), *gen_); }

Tensor Dropout::after_relu(const Tensor& x) const { return relu_dropout(x, p_, is_training(), *gen_); }

Tensor Dropout::add_then_norm(const Tensor& x, const Tensor& s, const LayerNorm& norm) const {
  return dropout_add_layer_norm(x, s, as_activation_dtype(norm.weight, x), as_activation_dtype(norm.bias, x), p_,
                                is_training(), *gen_, norm.eps());
}

}  // namespace loom::nn
