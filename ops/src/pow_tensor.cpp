// pow(x, e) = x^e with a tensor exponent, broadcasting.
//   dx = g * e * x^(e-1),   de = g * y * log(x)   (0 where x = 0, as PyTorch: 0^e is flat in e there)
// (each summed back to its input's shape)
#include "elementwise.h"

namespace loom {

Tensor pow(const Tensor& x, const Tensor& exponent, Where where) {
  const DType power = detail::floating_result_type(x, exponent);  // integer powers are computed in float32
  if (x.dtype() != power || exponent.dtype() != power) return detail::call_promoted(pow, x, exponent, power, where);
  CallSite site(where);
  Tensor out = detail::binary_op("pow_tensor", x, exponent, detail::DTypes::floating);
  return record(
      "pow_tensor", {x, exponent}, out,
      [x, exponent](BackwardContext& c, const Tensor& g) -> detail::Grads {
        Tensor dx, de;
        if (c.needs(0)) dx = mul(g, mul(exponent, pow(x, sub(exponent, detail::constant_like(exponent, 1.0)))));
        if (c.needs(1)) {
          Tensor zero = detail::constant_like(x, 0.0);
          de = mul(g, loom::where(eq(x, zero), zero, mul(c.out(), log(x))));
        }
        return {c.needs(0) ? sum_to(dx, c.input_shape(0)) : Tensor(),
                c.needs(1) ? sum_to(de, c.input_shape(1)) : Tensor()};
      },
      SavedOutput::yes);
}

LOOM_OP(pow_tensor){
    .name = "pow_tensor",
    .formula = "y = x^e   (e a tensor)",
    .derivative = "dx = g·e·x^(e-1);  de = g·y·log x   (0 where x = 0; each summed to its shape)",
    .shape_rule = "broadcast(x.shape, e.shape)",
    .call = [](const OpArgs& x) { return pow(x[0], x[1]); },
    .samples = {{{{{4, 7}, Domain::positive}, {{4, 7}}}, {}, "x > 0"},
                {{{{4, 7}, Domain::positive}, {{7}}}, {}, "exponent row broadcast"},
                {{{{2, 1, 5}, Domain::positive}, {{3, 1}}}, {}, "both broadcast"}},
};

}  // namespace loom
