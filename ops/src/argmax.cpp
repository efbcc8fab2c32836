// argmax(x, dim, keepdim): index (int64) of the largest value along dim, the first
// one on ties (NaN counts as largest). Piecewise constant: no gradient.
// max(x, dim, keepdim) = (values, indices): composite. indices = argmax, values =
// gather(x, dim, indices), so the values' gradient is gather's: g scattered to
// the argmax positions (one position per output, even on ties, like torch.max).
// (ops/support/extremes.cpp, shared with argmin and min.) CPU kernels: ops/cpu/argmax.cpp.
#include "extremes.h"

namespace loom {

Tensor argmax(const Tensor& x, int64_t dim, bool keepdim, Where where) {
  CallSite site(where);
  return detail::extreme_index("argmax", x, dim, keepdim);
}

ValuesAndIndices max(const Tensor& x, int64_t dim, bool keepdim, Where where) {
  CallSite site(where);
  return detail::extreme_along("max", "argmax", x, dim, keepdim);
}

LOOM_OP(argmax){
    .name = "argmax",
    .formula = "y = index of the first largest x along dim (int64)",
    .derivative = "none: piecewise constant",
    .shape_rule = "x.shape without dim (size 1 if keepdim), int64",
    .call = [](const OpArgs& x) { return argmax(x[0], 1); },
    .samples = detail::extreme_index_samples(),
    .differentiable = false,
    .schema = "argmax(Tensor input, int? dim=None, bool keepdim=False) -> Tensor",
    .invoke =
        [](const Arguments& a) {
          return detail::flat_or_along("argmax", a.tensor("input"), a.optional_integer("dim"), a.boolean("keepdim"));
        },
};

LOOM_OP(max){
    .name = "max",
    .formula = "(values, indices) = (gather(x, dim, i), i),  i = argmax(x, dim)",
    .derivative = "dx = g scattered to the argmax positions (gather's gradient)",
    .shape_rule = "x.shape without dim (size 1 if keepdim)",
    .call = [](const OpArgs& x) { return max(x[0], 1).values; },
    .samples = {unary_sample({4, 7}, Domain::any, "dim=1 values"),
                {{{{2, 3, 5}}}, [](const OpArgs& x) { return max(x[0], 0, true).values; }, "dim=0 keepdim values"},
                {{{{2, 3, 5}}}, [](const OpArgs& x) { return max(x[0], -1).values; }, "dim=-1 values"}},
};

}  // namespace loom
