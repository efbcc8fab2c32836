// tanh(x)                               dx = g * (1 - tanh(x)^2) = g * (1 - out^2)
#include "elementwise.h"

namespace loom {

Tensor tanh(const Tensor& x, Where where) {
  CallSite site(where);
  Tensor out = detail::unary_op("tanh", x, detail::DTypes::floating);
  return record(
      "tanh", {x}, out,
      [](BackwardContext& c, const Tensor& g) -> detail::Grads { return {tanh_backward(c.out(), g)}; },
      SavedOutput::yes);
}

// tanh_backward(y, g) = g * (1 - y^2): a primitive of its own so that the
// backward pass runs one fused kernel, yet stays differentiable (double backward):
//   d/dy = -2 * g * y,   d/dg = 1 - y^2
Tensor tanh_backward(const Tensor& y, const Tensor& grad, Where where) {
  CallSite site(where);
  Tensor out = detail::binary_op("tanh_backward", y, grad, detail::DTypes::numeric);
  return record("tanh_backward", {y, grad}, out, [y, grad](BackwardContext& c, const Tensor& g) -> detail::Grads {
    return {c.needs(0)
                ? sum_to(mul(mul(g, grad), mul(y, scalar_tensor(-2.0, {y.dtype(), y.device()}))), c.input_shape(0))
                : Tensor(),
            c.needs(1) ? sum_to(tanh_backward(y, g), c.input_shape(1)) : Tensor()};
  });
}

LOOM_OP(tanh){
    .name = "tanh",
    .formula = "y = tanh x",
    .derivative = "dx = tanh_backward(y, g) = g·(1 - y²)",
    .shape_rule = "y has x's shape",
    .call = [](const OpArgs& x) { return tanh(x[0]); },
    .samples = {unary_sample({4, 7}), unary_sample({2, 3, 5})},
    .schema = "tanh(Tensor input) -> Tensor",
};

LOOM_OP(tanh_backward){
    .name = "tanh_backward",
    .formula = "dx = g·(1 - y²)",
    .derivative = "d/dy = -2·v·g·y;  d/dg = v·(1 - y²)",
    .shape_rule = "broadcast(y.shape, g.shape)",
    .call = [](const OpArgs& x) { return tanh_backward(x[0], x[1]); },
    .samples = {binary_sample({4, 7}, {4, 7}, Domain::unit)},
};

}  // namespace loom
