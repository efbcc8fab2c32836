// amax(x, dims, keepdim) = max of x over dims
//   dx = g * [x == amax] / (number of maxima)     (ties share the gradient evenly,
//   as torch.amax does; samples draw distinct values so no tie sits near a sample)
// The tie weights [x == amax] / count are piecewise constant in x, so the backward
// is linear in g with constant weights and differentiates again without more code
// (ops/support/extremes.cpp, shared with amin). CPU kernels: ops/cpu/amax.cpp.
#include "extremes.h"

namespace loom {

Tensor amax(const Tensor& x, const Shape& dims, bool keepdim, Where where) {
  CallSite site(where);
  return detail::extreme_over("amax", x, dims, keepdim);
}

LOOM_OP(amax){
    .name = "amax",
    .formula = "y = max of x over dims",
    .derivative = "dx = g·[x = y] / (number of maxima)   (ties share g)",
    .shape_rule = "x.shape without dims (size 1 each if keepdim)",
    .call = [](const OpArgs& x) { return amax(x[0]); },
    .samples = {unary_sample({4, 7}, Domain::any, "all"),
                {.inputs = {{{4, 7}}}, .label = "dims={1}", .attributes = {{"dim", Shape{1}}}},
                {.inputs = {{{4, 7}}},
                 .label = "dims={0} keepdim",
                 .attributes = {{"dim", Shape{0}}, {"keepdim", true}}},
                {.inputs = {{{2, 3, 5}}}, .label = "dims={0,2}", .attributes = {{"dim", Shape{0, 2}}}},
                {.inputs = {{{2, 3, 5}}},
                 .label = "dims={-1} keepdim",
                 .attributes = {{"dim", Shape{-1}}, {"keepdim", true}}}},
    .schema = "amax(Tensor input, int[1] dim=[], bool keepdim=False) -> Tensor",
    .invoke = [](const Arguments& a) { return amax(a.tensor("input"), a.integers("dim"), a.boolean("keepdim")); },
};

}  // namespace loom
