// argmin(x, dim, keepdim): index (int64) of the smallest value along dim, the first
// one on ties (NaN counts as smallest, as torch's). Piecewise constant: no gradient.
// min(x, dim, keepdim) = (values, indices): composite, as max is: indices = argmin,
// values = gather(x, dim, indices). argmax's computation with the smallest value kept
// (ops/support/extremes.cpp), not argmax(-x), which overflows at int64's minimum.
// CPU kernels: ops/cpu/argmax.cpp.
#include "extremes.h"

namespace loom {

Tensor argmin(const Tensor& x, int64_t dim, bool keepdim, Where where) {
  CallSite site(where);
  return detail::extreme_index("argmin", x, dim, keepdim);
}

ValuesAndIndices min(const Tensor& x, int64_t dim, bool keepdim, Where where) {
  CallSite site(where);
  return detail::extreme_along("min", "argmin", x, dim, keepdim);
}

LOOM_OP(argmin){
    .name = "argmin",
    .formula = "y = index of the first smallest x along dim (int64)",
    .derivative = "none: piecewise constant",
    .shape_rule = "x.shape without dim (size 1 if keepdim), int64",
    .call = [](const OpArgs& x) { return argmin(x[0], 1); },
    .samples = detail::extreme_index_samples(),
    .differentiable = false,
    .schema = "argmin(Tensor input, int? dim=None, bool keepdim=False) -> Tensor",
    .invoke =
        [](const Arguments& a) {
          return detail::flat_or_along("argmin", a.tensor("input"), a.optional_integer("dim"), a.boolean("keepdim"));
        },
};

LOOM_OP(min){
    .name = "min",
    .formula = "(values, indices) = (gather(x, dim, i), i),  i = argmin(x, dim)",
    .derivative = "dx = g scattered to the argmin positions (gather's gradient)",
    .shape_rule = "x.shape without dim (size 1 if keepdim)",
    .call = [](const OpArgs& x) { return min(x[0], 1).values; },
    .samples = {unary_sample({4, 7}, Domain::any, "dim=1 values"),
                {{{{2, 3, 5}}}, [](const OpArgs& x) { return min(x[0], -1, true).values; }, "dim=-1 keepdim values"}},
};

}  // namespace loom
