// rsqrt(x) = x^(-1/2)                   dx = g * (-1/2) x^(-3/2) = -g * out^3 / 2
#include "elementwise.h"

namespace loom {

Tensor rsqrt(const Tensor& x, Where where) {
  CallSite site(where);
  Tensor out = detail::unary_op("rsqrt", x, detail::DTypes::floating);
  return record(
      "rsqrt", {x}, out,
      [](BackwardContext& c, const Tensor& g) -> detail::Grads {
        return {mul(g, mul(pow(c.out(), 3.0), detail::constant_like(g, -0.5)))};
      },
      SavedOutput::yes);
}

LOOM_OP(rsqrt){
    .name = "rsqrt",
    .formula = "y = 1/√x",
    .derivative = "dx = -g·y³/2",
    .shape_rule = "y has x's shape",
    .call = [](const OpArgs& x) { return rsqrt(x[0]); },
    .samples = {unary_sample({4, 7}, Domain::positive), unary_sample({2, 3, 5}, Domain::positive),
                unary_sample({}, Domain::positive, "0-d")},
    .schema = "rsqrt(Tensor input) -> Tensor",
};

}  // namespace loom
