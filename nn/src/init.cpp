#include "loom/nn/init.h"

#include <cmath>

#include "loom/error.h"

namespace loom::nn {

Tensor xavier_uniform(const Shape& shape, TensorOptions options, Generator& gen) {
  LOOM_CHECK(shape.size() == 2, "xavier_uniform: expected a 2-D [fan_out, fan_in] shape, got {}", shape);
  const double bound = std::sqrt(6.0 / static_cast<double>(shape[0] + shape[1]));
  return rand(shape, options, gen, -bound, bound);
}

}  // namespace loom::nn
