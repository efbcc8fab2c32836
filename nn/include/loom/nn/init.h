#pragma once
// Parameter initializers (fresh tensors; Module::register_parameter marks them trainable).
#include "loom/random.h"

namespace loom::nn {

// Glorot/Xavier uniform for a [fan_out, fan_in] weight: U(-b, b), b = sqrt(6 / (fan_in + fan_out)).
// Keeps activation and gradient variance roughly constant through a stack of
// linear layers; what the reference Transformer implementations use for every projection.
Tensor xavier_uniform(const Shape& shape, TensorOptions options = {}, Generator& gen = default_generator());

}  // namespace loom::nn
