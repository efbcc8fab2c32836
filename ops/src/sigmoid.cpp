// sigmoid(x) = 1 / (1 + e^-x)           dx = g * y * (1 - y),  y = out
#include "elementwise.h"

namespace loom {

Tensor sigmoid(const Tensor& x, Where where) {
  CallSite site(where);
  Tensor out = detail::unary_op("sigmoid", x, detail::DTypes::floating);
  return record(
      "sigmoid", {x}, out,
      [](BackwardContext& c, const Tensor& g) -> detail::Grads { return {sigmoid_backward(c.out(), g)}; },
      SavedOutput::yes);
}

// sigmoid_backward(y, g) = g * y * (1 - y): a primitive of its own so that the
// backward pass runs one fused kernel, yet stays differentiable (double backward):
//   d/dy = g * (1 - 2y),   d/dg = y * (1 - y)
Tensor sigmoid_backward(const Tensor& y, const Tensor& grad, Where where) {
  CallSite site(where);
  Tensor out = detail::binary_op("sigmoid_backward", y, grad, detail::DTypes::floating);
  return record("sigmoid_backward", {y, grad}, out, [y, grad](BackwardContext& c, const Tensor& g) -> detail::Grads {
    Tensor one_minus_2y = sub(detail::constant_like(y, 1.0), mul(y, detail::constant_like(y, 2.0)));
    return {c.needs(0) ? sum_to(mul(mul(g, grad), one_minus_2y), c.input_shape(0)) : Tensor(),
            c.needs(1) ? sum_to(sigmoid_backward(y, g), c.input_shape(1)) : Tensor()};
  });
}

LOOM_OP(sigmoid){
    .name = "sigmoid",
    .formula = "y = 1/(1 + e^(-x))",
    .derivative = "dx = g·y·(1 - y)",
    .shape_rule = "y has x's shape",
    .call = [](const OpArgs& x) { return sigmoid(x[0]); },
    .samples = {unary_sample({4, 7}), unary_sample({2, 3, 5}), unary_sample({}, Domain::any, "0-d")},
    .schema = "sigmoid(Tensor input) -> Tensor",
};

LOOM_OP(sigmoid_backward){
    .name = "sigmoid_backward",
    .formula = "dx = g·y·(1 - y)",
    .derivative = "d/dy = v·g·(1 - 2y);  d/dg = v·y·(1 - y)",
    .shape_rule = "broadcast(y.shape, g.shape)",
    .call = [](const OpArgs& x) { return sigmoid_backward(x[0], x[1]); },
    .samples = {binary_sample({4, 7}, {4, 7}, Domain::unit), binary_sample({4, 7}, {7}, Domain::unit, "row broadcast"),
                binary_sample({3, 1}, {2, 1, 5}, Domain::unit, "both broadcast")},
};

}  // namespace loom
