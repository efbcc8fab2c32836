// bias_gelu(x, b) = gelu(x + b), b [D] added along x's last dim [.., D]
//   dx = gelu_backward(x + b, g),   db = sum of dx over the rows
// Fused: the forward reads x and b and writes y in one pass, with no x + b tensor
// in memory. The backward is written with ops, so it is differentiable again.
// Kernels: ops/cpu/bias_gelu.cpp, cuda/src/bias_gelu.{cpp,cu}.
#include "rows.h"

namespace loom {

Tensor bias_gelu(const Tensor& x, const Tensor& bias, Where where) {
  CallSite site(where);
  detail::check_same_kind("bias_gelu", x, bias);
  detail::check_dtype("bias_gelu", x, detail::DTypes::floating);
  LOOM_CHECK(x.dim() >= 1 && bias.dim() == 1 && bias.shape()[0] == x.shape().back(),
             "bias_gelu: bias must be [D] for x [.., D], got x {} and bias {}", x.shape(), bias.shape());
  Tensor out = Tensor::empty(x.shape(), {x.dtype(), x.device()});
  detail::kernel_for<kernels::BiasActivationKernel>("bias_gelu", x)(out, detail::dense(x), detail::dense(bias));
  return record("bias_gelu", {x, bias}, out, [x, bias](BackwardContext& c, const Tensor& g) -> detail::Grads {
    Tensor dx = gelu_backward(add(x, bias), g);
    return {c.needs(0) ? dx : Tensor(), c.needs(1) ? sum_to(dx, c.input_shape(1)) : Tensor()};
  });
}

LOOM_OP(bias_gelu){
    .name = "bias_gelu",
    .formula = "y = gelu(x + b),  b added along the last dim",
    .derivative = "dx = gelu_backward(x + b, g);  db = Σ_rows dx",
    .shape_rule = "x [.., D], b [D] → x's shape",
    .call = [](const OpArgs& a) { return bias_gelu(a[0], a[1]); },
    .samples = {binary_sample({4, 6}, {6}), binary_sample({2, 3, 5}, {5}), binary_sample({7}, {7}, Domain::any, "1-d"),
                binary_sample({3, 70}, {70}, Domain::any, "D=70 (vector lanes)")},
    .composed = [](const OpArgs& a) { return gelu(add(a[0], a[1])); },
};

}  // namespace loom
