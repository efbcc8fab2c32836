#include "loom/nn/layers.h"
#include "loom/ops.h"

namespace loom::nn {

PositionwiseFeedForward::PositionwiseFeedForward(int64_t d_model, int64_t d_ff, double p, Generator& gen,
                                                 TensorOptions options)
    : w_1(d_model, d_ff, true, gen, options), w_2(d_ff, d_model, true, gen, options), dropout(p, gen) {
  register_module("w_1", w_1);
  register_module("w_2", w_2);
  register_module("dropout", dropout);
}

Tensor PositionwiseFeedForward::forward(const Tensor& x) const { return w_2(dropout.after_relu(w_1(x))); }

}  // namespace loom::nn
