// exp(x) = e^x                          dx = g * e^x = g * out
#include "elementwise.h"

namespace loom {

Tensor exp(const Tensor& x, Where where) {
  CallSite site(where);
  Tensor out = detail::unary_op("exp", x, detail::DTypes::floating);
  return record(
      "exp", {x}, out, [](BackwardContext& c, const Tensor& g) -> detail::Grads { return {mul(g, c.out())}; },
      SavedOutput::yes);
}

LOOM_OP(exp){
    .name = "exp",
    .formula = "y = eˣ",
    .derivative = "dx = g·y",
    .shape_rule = "y has x's shape",
    .call = [](const OpArgs& x) { return exp(x[0]); },
    .samples = {unary_sample({4, 7}), unary_sample({2, 3, 5}), unary_sample({}, Domain::any, "0-d")},
    .schema = "exp(Tensor input) -> Tensor",
};

}  // namespace loom
