// relu(x) = max(x, 0)                   dx = relu_backward(x, g) = g * [x > 0]   (kink at 0: samples avoid it)
#include "elementwise.h"

namespace loom {

Tensor relu(const Tensor& x, Where where) {
  CallSite site(where);
  Tensor out = detail::unary_op("relu", x, detail::DTypes::numeric);
  return record("relu", {x}, out,
                [x](BackwardContext&, const Tensor& g) -> detail::Grads { return {relu_backward(x, g)}; });
}

// relu_backward(x, g) = g where x > 0, else 0: one fused kernel for the backward
// pass (mul(g, step(x)) ran two, writing and re-reading a [x > 0] tensor). A
// select, not a product, so g = inf or NaN where x <= 0 still gives 0, like
// PyTorch's threshold_backward. Itself differentiable (double backward): it is
// linear in g and piecewise constant in x,
//   d/dg = [x > 0] -> relu_backward(x, gg),   d/dx = 0.
Tensor relu_backward(const Tensor& x, const Tensor& grad, Where where) {
  CallSite site(where);
  Tensor out = detail::binary_op("relu_backward", x, grad, detail::DTypes::floating);
  return record("relu_backward", {x, grad}, out, [x](BackwardContext& c, const Tensor& g) -> detail::Grads {
    return {c.needs(0) ? zeros(c.input_shape(0), {x.dtype(), x.device()}) : Tensor(),
            c.needs(1) ? sum_to(relu_backward(x, g), c.input_shape(1)) : Tensor()};
  });
}

// step(x) = [x > 0]: piecewise constant, so its gradient is zero everywhere it exists.
Tensor step(const Tensor& x, Where where) {
  CallSite site(where);
  return detail::unary_op("step", x, detail::DTypes::numeric);
}

LOOM_OP(relu){
    .name = "relu",
    .formula = "y = max(x, 0)",
    .derivative = "dx = relu_backward(x, g) = g·[x > 0]   (kink at 0)",
    .shape_rule = "y has x's shape",
    .call = [](const OpArgs& x) { return relu(x[0]); },
    .samples = {unary_sample({4, 7}, Domain::away_from_zero), unary_sample({2, 3, 5}, Domain::away_from_zero)},
    .schema = "relu(Tensor input) -> Tensor",
};

// x away from the kink (finite differences in x must not cross 0); g anywhere.
LOOM_OP(relu_backward){
    .name = "relu_backward",
    .formula = "dx = g·[x > 0]   (a select: NaN in g where x ≤ 0 gives 0)",
    .derivative = "d/dg = relu_backward(x, v);  d/dx = 0",
    .shape_rule = "broadcast(x.shape, g.shape)",
    .call = [](const OpArgs& x) { return relu_backward(x[0], x[1]); },
    .samples = {{{{{4, 7}, Domain::away_from_zero}, {{4, 7}}}, {}, "[4,7], [4,7]"},
                {{{{4, 7}, Domain::away_from_zero}, {{7}}}, {}, "row broadcast"},
                {{{{3, 1}, Domain::away_from_zero}, {{2, 1, 5}}}, {}, "both broadcast"}},
    // [x > 0] written as relu(x) / x (x is never 0 here), not step(x): step has no
    // gradient, and the composition must give x a (zero) gradient too.
    .composed = [](const OpArgs& x) { return mul(x[1], div(relu(x[0]), x[0])); },
};

LOOM_OP(step){
    .name = "step",
    .formula = "y = [x > 0]",
    .derivative = "none: piecewise constant",
    .shape_rule = "y has x's shape",
    .call = [](const OpArgs& x) { return step(x[0]); },
    .samples = {unary_sample({4, 7}, Domain::away_from_zero)},
    .differentiable = false,
};

}  // namespace loom
