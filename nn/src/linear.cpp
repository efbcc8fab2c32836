#include "loom/nn/init.h"
#include "loom/nn/layers.h"
#include "loom/ops.h"

namespace loom::nn {

Linear::Linear(int64_t in_features, int64_t out_features, bool with_bias, Generator& gen, TensorOptions options)
    : in_(in_features), out_(out_features) {
  LOOM_CHECK(in_features > 0 && out_features > 0, "Linear: sizes must be positive, got {} -> {}", in_features,
             out_features);
  register_parameter("weight", weight, xavier_uniform({out_features, in_features}, options, gen));
  if (with_bias) register_parameter("bias", bias, zeros({out_features}, options));
}

Tensor Linear::forward(const Tensor& x) const {
  LOOM_CHECK(x.dim() >= 1 && x.shape().back() == in_, "Linear({} -> {}): input of shape {} must end in {} features",
             in_, out_, x.shape(), in_);
  return linear(x, as_activation_dtype(weight, x), as_activation_dtype(bias, x));
}

Tensor as_activation_dtype(const Tensor& param, const Tensor& x) {
  if (!param.defined() || x.dtype() != DType::bf16 || param.dtype() == DType::bf16) return param;
  return to_dtype(param, DType::bf16);
}

}  // namespace loom::nn
