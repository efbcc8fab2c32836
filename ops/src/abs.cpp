// abs(x) = |x|                          dx = g * sign(x)   (kink at 0: samples avoid it)
#include "elementwise.h"

namespace loom {

Tensor abs(const Tensor& x, Where where) {
  CallSite site(where);
  Tensor out = detail::unary_op("abs", x, detail::DTypes::numeric);
  return record("abs", {x}, out, [x](BackwardContext&, const Tensor& g) -> detail::Grads { return {mul(g, sign(x))}; });
}

// sign(x) in {-1, 0, 1}: piecewise constant, so its gradient is zero everywhere it exists
// (recorded as such, as PyTorch's: a loss through sign still has a gradient, of zeros).
Tensor sign(const Tensor& x, Where where) {
  CallSite site(where);
  Tensor out = detail::unary_op("sign", x, detail::DTypes::numeric);
  return record("sign", {x}, out, [](BackwardContext&, const Tensor& g) -> detail::Grads { return {zeros_like(g)}; });
}

LOOM_OP(abs){
    .name = "abs",
    .formula = "y = |x|",
    .derivative = "dx = g·sign(x)   (kink at 0)",
    .shape_rule = "y has x's shape",
    .call = [](const OpArgs& x) { return abs(x[0]); },
    .samples = {unary_sample({4, 7}, Domain::away_from_zero), unary_sample({2, 3, 5}, Domain::away_from_zero),
                unary_sample({}, Domain::away_from_zero, "0-d")},
    .schema = "abs(Tensor input) -> Tensor",
};

LOOM_OP(sign){
    .name = "sign",
    .formula = "y = sign(x) ∈ {-1, 0, 1}",
    .derivative = "none: piecewise constant (0 wherever it exists)",
    .shape_rule = "y has x's shape",
    .call = [](const OpArgs& x) { return sign(x[0]); },
    .samples = {unary_sample({4, 7}, Domain::away_from_zero)},
    .differentiable = false,
    .schema = "sign(Tensor input) -> Tensor",
};

}  // namespace loom
