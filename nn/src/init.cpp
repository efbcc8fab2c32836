#include "loom/nn/init.h"

#include <cmath>

#include "loom/error.h"

namespace loom::nn {

namespace {
thread_local bool skipping = false;
}

SkipInit::SkipInit() : previous_(skipping) { skipping = true; }
SkipInit::~SkipInit() { skipping = previous_; }

Tensor xavier_uniform(const Shape& shape, TensorOptions options, Generator& gen) {
  LOOM_CHECK(shape.size() == 2, "xavier_uniform: expected a 2-D [fan_out, fan_in] shape, got {}", shape);
  if (skipping) return Tensor::empty(shape, options);
  const double bound = std::sqrt(6.0 / static_cast<double>(shape[0] + shape[1]));
  return rand(shape, options, gen, -bound, bound);
}

Tensor normal(const Shape& shape, double std, TensorOptions options, Generator& gen) {
  if (skipping) return Tensor::empty(shape, options);
  return randn(shape, options, gen, 0.0, std);
}

}  // namespace loom::nn
