// pow(x, p) = x^p for a scalar p        dx = g * p * x^(p-1)
#include "elementwise.h"

namespace loom {

Tensor pow(const Tensor& x, double exponent, Where where) {
  CallSite site(where);
  Tensor out = detail::unary_op("pow", x, detail::DTypes::floating, {exponent});
  return record("pow", {x}, out, [x, exponent](BackwardContext&, const Tensor& g) -> detail::Grads {
    if (exponent == 0.0) return {zeros_like(g)};
    return {mul(g, mul(pow(x, exponent - 1.0), scalar_tensor(exponent, {x.dtype(), x.device()})))};
  });
}

LOOM_OP(pow){
    .name = "pow",
    .formula = "y = x^p   (p a scalar)",
    .derivative = "dx = g·p·x^(p-1)",
    .shape_rule = "y has x's shape",
    .call = [](const OpArgs& x) { return pow(x[0], 3.0); },
    .samples = {unary_sample({4, 7}, Domain::any, "p=3"),
                {{{{4, 7}, Domain::positive}}, [](const OpArgs& x) { return pow(x[0], 0.5); }, "p=0.5"},
                {{{{3, 5}, Domain::positive}}, [](const OpArgs& x) { return pow(x[0], -1.5); }, "p=-1.5"},
                {{{{3, 5}}}, [](const OpArgs& x) { return pow(x[0], 2.0); }, "p=2"}},
};

}  // namespace loom
