// clamp(x, lo, hi) = min(max(x, lo), hi)   dx = g * [lo <= x <= hi]   (kinks at lo and hi)
#include <limits>

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
static Sample clamp_sample(Domain domain, Shape shape, double lo, double hi, std::string label) {
  return {.inputs = {{std::move(shape), domain}}, .label = std::move(label), .attributes = {{"min", lo}, {"max", hi}}};
}

LOOM_OP(clamp){
    .name = "clamp",
    .formula = "y = min(max(x, lo), hi)",
    .derivative = "dx = g·[lo ≤ x ≤ hi]   (kinks at lo and hi)",
    .shape_rule = "y has x's shape",
    .call = [](const OpArgs& x) { return clamp(x[0], -0.1, 3.0); },
    .samples = {clamp_sample(Domain::away_from_zero, {4, 7}, -0.1, 3.0, "[-0.1, 3]: clamps negatives"),
                clamp_sample(Domain::away_from_zero, {2, 3, 5}, -3.0, 0.1, "[-3, 0.1]: clamps positives"),
                clamp_sample(Domain::away_from_zero, {4, 7}, -0.1, 0.1, "[-0.1, 0.1]: clamps all"),
                clamp_sample(Domain::any, {4, 7}, -3.0, 3.0, "[-3, 3]: clamps none"),
                {.inputs = {{{4, 7}, Domain::away_from_zero}},
                 .label = "min only",
                 .attributes = {{"min", 0.1}, {"max", std::monostate{}}}}},
    .schema = "clamp(Tensor input, float? min=None, float? max=None) -> Tensor",
    .invoke =
        [](const Arguments& a) {
          LOOM_CHECK(!a.is_none("min") || !a.is_none("max"), "clamp: at least one of 'min' or 'max' must not be None");
          const double inf = std::numeric_limits<double>::infinity();
          return clamp(a.tensor("input"), a.is_none("min") ? -inf : a.number("min"),
                       a.is_none("max") ? inf : a.number("max"));
        },
};

}  // namespace loom
