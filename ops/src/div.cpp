// div(a, b) = a / b, broadcasting; true division (int / int is float32).      da = g / b,  db = -g * a / b^2 = -g * out / b
#include "elementwise.h"

namespace loom {

Tensor div(const Tensor& a, const Tensor& b, Where where) {
  // True division, as PyTorch's: integers and bools divide as the default float dtype.
  const DType quotient = detail::floating_result_type(a, b);
  if (a.dtype() != quotient || b.dtype() != quotient) return detail::call_promoted(div, a, b, quotient, where);
  CallSite site(where);
  Tensor out = detail::binary_op("div", a, b, detail::DTypes::numeric);
  return record(
      "div", {a, b}, out,
      [b](BackwardContext& c, const Tensor& g) -> detail::Grads {
        Tensor ga = div(g, b);
        return {c.needs(0) ? sum_to(ga, c.input_shape(0)) : Tensor(),
                c.needs(1) ? sum_to(neg(mul(ga, c.out())), c.input_shape(1)) : Tensor()};
      },
      SavedOutput::yes);
}

LOOM_OP(div){
    .name = "div",
    .formula = "y = a / b",
    .derivative = "da = g / b,  db = -g·a / b² = -g·y / b   (each summed to its shape)",
    .shape_rule = "broadcast(a.shape, b.shape)",
    .call = [](const OpArgs& x) { return div(x[0], x[1]); },
    .samples = {binary_sample({4, 7}, {4, 7}, Domain::away_from_zero),
                binary_sample({4, 7}, {7}, Domain::away_from_zero, "row broadcast"),
                binary_sample({2, 1, 5}, {3, 1}, Domain::away_from_zero, "both broadcast")},
    .schema = "div(Tensor input, Tensor other, *, str? rounding_mode=None) -> Tensor",
    .invoke =
        [](const Arguments& a) {
          LOOM_CHECK(a.is_none("rounding_mode"), "div: rounding_mode='{}' is not supported (true division only)",
                     a.text("rounding_mode"));
          return div(a.tensor("input"), a.tensor("other"));
        },
};

}  // namespace loom
