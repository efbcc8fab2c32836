// clamp(x, lo, hi) = min(max(x, lo), hi)   dx = g * [lo <= x <= hi]   (kinks at lo and hi)
#include "elementwise.h"

namespace loom {

Tensor clamp(const Tensor& x, double min, double max, Where where) {
  CallSite site(where);
  // An empty range is almost always a bug (swapped bounds); say so rather than return a constant.
  LOOM_CHECK(!(min > max), "clamp: min ({}) is greater than max ({})", min, max);
  Tensor out = detail::unary_op("clamp", x, detail::DTypes::numeric, {min, max});
  return record("clamp", {x}, out, [x, min, max](BackwardContext&, const Tensor& g) -> detail::Grads {
    // The mask is piecewise constant (no gradient of its own), like relu's step.
    return {mul(g, detail::unary_op("clamp_mask", x, detail::DTypes::floating, {min, max}))};
  });
}

// The kinks are avoided by construction, not by luck: away_from_zero draws
// |x| in [0.25, 2], so bounds inside (-0.25, 0.25) or outside [-2, 2] are never
// within a finite-difference step of a sample.
static OpCall clamp_to(double lo, double hi) {
  return [lo, hi](const OpArgs& x) { return clamp(x[0], lo, hi); };
}

LOOM_OP(clamp){
    .name = "clamp",
    .formula = "y = min(max(x, lo), hi)",
    .derivative = "dx = g·[lo ≤ x ≤ hi]   (kinks at lo and hi)",
    .shape_rule = "y has x's shape",
    .call = clamp_to(-0.1, 3.0),
    .samples = {{{{{4, 7}, Domain::away_from_zero}}, clamp_to(-0.1, 3.0), "[-0.1, 3]: clamps negatives"},
                {{{{2, 3, 5}, Domain::away_from_zero}}, clamp_to(-3.0, 0.1), "[-3, 0.1]: clamps positives"},
                {{{{4, 7}, Domain::away_from_zero}}, clamp_to(-0.1, 0.1), "[-0.1, 0.1]: clamps all"},
                {{{{4, 7}}}, clamp_to(-3.0, 3.0), "[-3, 3]: clamps none"}},
};

}  // namespace loom
