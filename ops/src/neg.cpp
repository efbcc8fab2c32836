// neg(x) = -x                           dx = -g
#include "elementwise.h"

namespace loom {

Tensor neg(const Tensor& x, Where where) {
  CallSite site(where);
  Tensor out = detail::unary_op("neg", x, detail::DTypes::numeric);
  return record("neg", {x}, out, [](BackwardContext&, const Tensor& g) -> detail::Grads { return {neg(g)}; });
}

LOOM_OP(neg){
    .name = "neg",
    .formula = "y = -x",
    .derivative = "dx = -g",
    .shape_rule = "y has x's shape",
    .call = [](const OpArgs& x) { return neg(x[0]); },
    .samples = {unary_sample({4, 7}), unary_sample({}, Domain::any, "0-d")},
    .schema = "neg(Tensor input) -> Tensor",
};

}  // namespace loom
