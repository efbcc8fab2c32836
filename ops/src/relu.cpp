// relu(x) = max(x, 0)                   dx = g * [x > 0]   (kink at 0: samples avoid it)
#include "elementwise.h"

namespace loom {

Tensor relu(const Tensor& x, Where where) {
  CallSite site(where);
  Tensor out = detail::unary_numeric<fn::Relu>("relu", x);
  return record("relu", {x}, out, [x](BackwardContext&, const Tensor& g) -> detail::Grads { return {mul(g, step(x))}; });
}

// step(x) = [x > 0]: piecewise constant, so its gradient is zero everywhere it exists.
Tensor step(const Tensor& x, Where where) {
  CallSite site(where);
  return detail::unary_numeric<fn::Step>("step", x);
}

LOOM_OP(relu){
    .name = "relu",
    .call = [](const OpArgs& x) { return relu(x[0]); },
    .samples = {unary_sample({4, 7}, Domain::away_from_zero), unary_sample({2, 3, 5}, Domain::away_from_zero)},
};

LOOM_OP(step){
    .name = "step",
    .call = [](const OpArgs& x) { return step(x[0]); },
    .samples = {unary_sample({4, 7}, Domain::away_from_zero)},
    .differentiable = false,
};

}  // namespace loom
