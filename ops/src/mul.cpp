// mul(a, b) = a * b, broadcasting.      da = g * b,  db = g * a
#include "elementwise.h"

namespace loom {

Tensor mul(const Tensor& a, const Tensor& b, Where where) {
  if (a.dtype() != b.dtype()) return detail::call_promoted(mul, a, b, detail::result_type(a, b), where);
  CallSite site(where);
  Tensor out = detail::binary_op("mul", a, b, detail::DTypes::numeric);
  return record("mul", {a, b}, out, [a, b](BackwardContext& c, const Tensor& g) -> detail::Grads {
    return {c.needs(0) ? sum_to(mul(g, b), c.input_shape(0)) : Tensor(),
            c.needs(1) ? sum_to(mul(g, a), c.input_shape(1)) : Tensor()};
  });
}

LOOM_OP(mul){
    .name = "mul",
    .formula = "y = a·b",
    .derivative = "da = sum_to(g·b, a.shape);  db = sum_to(g·a, b.shape)",
    .shape_rule = "broadcast(a.shape, b.shape)",
    .call = [](const OpArgs& x) { return mul(x[0], x[1]); },
    .samples = {binary_sample({4, 7}, {4, 7}), binary_sample({4, 7}, {7}, Domain::any, "row broadcast"),
                binary_sample({2, 1, 5}, {3, 1}, Domain::any, "both broadcast"),
                binary_sample({3, 4}, {}, Domain::any, "0-d")},
    .schema = "mul(Tensor input, Tensor other) -> Tensor",
};

}  // namespace loom
