#pragma once
// Parameter initializers (fresh tensors; Module::register_parameter marks them trainable).
#include "loom/random.h"

namespace loom::nn {

// Glorot/Xavier uniform for a [fan_out, fan_in] weight: U(-b, b), b = sqrt(6 / (fan_in + fan_out)).
// Keeps activation and gradient variance roughly constant through a stack of
// linear layers; what the reference Transformer implementations use for every projection.
Tensor xavier_uniform(const Shape& shape, TensorOptions options = {}, Generator& gen = default_generator());

// N(0, std^2): embedding tables (std = 1/sqrt(dim), the scale the sqrt(dim) multiplier undoes).
Tensor normal(const Shape& shape, double std, TensorOptions options = {}, Generator& gen = default_generator());

// While one lives, on its thread, the initializers above return uninitialized tensors
// and leave the generator alone: for a model built only to have every parameter loaded
// from a checkpoint (nn::load refuses one that lacks any), which then starts without
// drawing random numbers it would overwrite (0.2 of `loom translate`'s 0.47 s start).
class SkipInit {
 public:
  SkipInit();
  ~SkipInit();
  SkipInit(const SkipInit&) = delete;
  SkipInit& operator=(const SkipInit&) = delete;

 private:
  bool previous_;
};

}  // namespace loom::nn
