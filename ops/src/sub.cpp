// sub(a, b) = a - b, broadcasting.      da = g,  db = -g
#include "elementwise.h"

namespace loom {

Tensor sub(const Tensor& a, const Tensor& b, Where where) {
  if (a.dtype() != b.dtype()) return detail::call_promoted(sub, a, b, detail::result_type(a, b), where);
  CallSite site(where);
  Tensor out = detail::binary_op("sub", a, b, detail::DTypes::numeric);
  return record("sub", {a, b}, out, [](BackwardContext& c, const Tensor& g) -> detail::Grads {
    return {c.needs(0) ? sum_to(g, c.input_shape(0)) : Tensor(),
            c.needs(1) ? sum_to(neg(g), c.input_shape(1)) : Tensor()};
  });
}

LOOM_OP(sub){
    .name = "sub",
    .formula = "y = a - b",
    .derivative = "da = sum_to(g, a.shape);  db = -sum_to(g, b.shape)",
    .shape_rule = "broadcast(a.shape, b.shape)",
    .call = [](const OpArgs& x) { return sub(x[0], x[1]); },
    .samples = {binary_sample({4, 7}, {4, 7}), binary_sample({4, 7}, {7}, Domain::any, "row broadcast"),
                binary_sample({2, 1, 5}, {3, 1}, Domain::any, "both broadcast")},
    .schema = "sub(Tensor input, Tensor other, *, float alpha=1) -> Tensor",
    .invoke =
        [](const Arguments& a) {
          return sub(a.tensor("input"), detail::times_alpha(a.tensor("other"), a.number("alpha"), "sub"));
        },
};

}  // namespace loom
