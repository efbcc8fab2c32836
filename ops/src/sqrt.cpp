// sqrt(x) = x^(1/2)                     dx = g / (2 sqrt(x)) = g / (2 out)
#include "elementwise.h"

namespace loom {

Tensor sqrt(const Tensor& x, Where where) {
  CallSite site(where);
  Tensor out = detail::unary_op("sqrt", x, detail::DTypes::floating);
  return record(
      "sqrt", {x}, out,
      [](BackwardContext& c, const Tensor& g) -> detail::Grads {
        // Through the output: one division, and the output carries its own graph for double backward.
        return {div(g, mul(c.out(), detail::constant_like(g, 2.0)))};
      },
      SavedOutput::yes);
}

// Domain::positive: sqrt is not differentiable at 0 and undefined below it.
LOOM_OP(sqrt){
    .name = "sqrt",
    .formula = "y = √x",
    .derivative = "dx = g / (2y)",
    .shape_rule = "y has x's shape",
    .call = [](const OpArgs& x) { return sqrt(x[0]); },
    .samples = {unary_sample({4, 7}, Domain::positive), unary_sample({2, 3, 5}, Domain::positive),
                unary_sample({}, Domain::positive, "0-d")},
    .schema = "sqrt(Tensor input) -> Tensor",
};

}  // namespace loom
