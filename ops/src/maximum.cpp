// maximum(a, b) = a > b ? a : b, broadcasting; NaN propagates.
//                                       da = g * [a > b],  db = g * [b > a]
// On a tie (a == b) the gradient is split, 1/2 to each side, like PyTorch: the
// kink is there, and splitting keeps da + db = g. Samples are continuous draws:
// a tie, or a near-tie within a finite-difference step, is vanishingly unlikely
// and the drawn values are fixed, so a passing check stays passing.
#include "elementwise.h"

namespace loom {

Tensor maximum(const Tensor& a, const Tensor& b, Where where) {
  if (a.dtype() != b.dtype()) return detail::call_promoted(maximum, a, b, detail::result_type(a, b), where);
  CallSite site(where);
  Tensor out = detail::binary_op("maximum", a, b, detail::DTypes::numeric);
  return record("maximum", {a, b}, out, [a, b](BackwardContext& c, const Tensor& g) -> detail::Grads {
    // Each side's share (1, 1/2 or 0) is piecewise constant: no gradient of its own.
    auto share = [](const Tensor& self, const Tensor& other) {
      return detail::binary_op("maximum_share", self, other, detail::DTypes::floating);
    };
    return {c.needs(0) ? sum_to(mul(g, share(a, b)), c.input_shape(0)) : Tensor(),
            c.needs(1) ? sum_to(mul(g, share(b, a)), c.input_shape(1)) : Tensor()};
  });
}

LOOM_OP(maximum){
    .name = "maximum",
    .formula = "y = a > b ? a : b   (NaN propagates)",
    .derivative = "da = g·[a > b];  db = g·[b > a]   (a tie gives g/2 to each)",
    .shape_rule = "broadcast(a.shape, b.shape)",
    .call = [](const OpArgs& x) { return maximum(x[0], x[1]); },
    .samples = {binary_sample({4, 7}, {4, 7}), binary_sample({4, 7}, {7}, Domain::any, "row broadcast"),
                binary_sample({2, 1, 5}, {3, 1}, Domain::any, "both broadcast"),
                binary_sample({3, 4}, {}, Domain::any, "0-d")},
    .schema = "maximum(Tensor input, Tensor other) -> Tensor",
};

}  // namespace loom
