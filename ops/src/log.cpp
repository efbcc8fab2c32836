// log(x) = ln x                         dx = g / x
#include "elementwise.h"

namespace loom {

Tensor log(const Tensor& x, Where where) {
  CallSite site(where);
  Tensor out = detail::unary_op("log", x, detail::DTypes::floating);
  return record("log", {x}, out, [x](BackwardContext&, const Tensor& g) -> detail::Grads { return {div(g, x)}; });
}

LOOM_OP(log){
    .name = "log",
    .formula = "y = ln x",
    .derivative = "dx = g / x",
    .shape_rule = "y has x's shape",
    .call = [](const OpArgs& x) { return log(x[0]); },
    .samples = {unary_sample({4, 7}, Domain::positive), unary_sample({2, 3, 5}, Domain::positive)},
    .schema = "log(Tensor input) -> Tensor",
};

}  // namespace loom
