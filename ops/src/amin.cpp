// amin(x, dims, keepdim) = min of x over dims
//   dx = g * [x == amin] / (number of minima)     (ties share the gradient evenly,
//   as torch.amin does)
// amax's computation with the smallest value kept (ops/support/extremes.cpp), not
// -amax(-x), which overflows at int64's minimum. CPU kernels: ops/cpu/amax.cpp.
#include "extremes.h"

namespace loom {

Tensor amin(const Tensor& x, const Shape& dims, bool keepdim, Where where) {
  CallSite site(where);
  return detail::extreme_over("amin", x, dims, keepdim);
}

LOOM_OP(amin){
    .name = "amin",
    .formula = "y = min of x over dims",
    .derivative = "dx = g·[x = y] / (number of minima)   (ties share g)",
    .shape_rule = "x.shape without dims (size 1 each if keepdim)",
    .call = [](const OpArgs& x) { return amin(x[0]); },
    .samples = {unary_sample({4, 7}, Domain::any, "all"),
                {.inputs = {{{4, 7}}}, .label = "dims={1}", .attributes = {{"dim", Shape{1}}}},
                {.inputs = {{{2, 3, 5}}},
                 .label = "dims={0,2} keepdim",
                 .attributes = {{"dim", Shape{0, 2}}, {"keepdim", true}}}},
    .schema = "amin(Tensor input, int[1] dim=[], bool keepdim=False) -> Tensor",
    .invoke = [](const Arguments& a) { return amin(a.tensor("input"), a.integers("dim"), a.boolean("keepdim")); },
};

}  // namespace loom
