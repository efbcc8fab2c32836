// softmax(x, dim, mask) over `dim`, with z = x + mask (z = -inf where a bool mask is true):
//   y_i = exp(z_i - max z) / sum_j exp(z_j - max z)
//   dx = softmax_backward(y, g) = y * (g - sum(g * y))      dmask (float) = dx summed to mask's shape
// softmax_backward(y, g) is a primitive of its own (one fused kernel in the
// backward pass) whose derivatives are written with ops, so double backward works:
//   d/dg = softmax_backward(y, v)          d/dy = v * (g - sum(g * y)) - g * sum(v * y)
// A fully masked row (max z = -inf) is all zeros, not NaN; its gradient is 0 (y = 0).
// Any dim: the kernel runs over the last dim; another dim is transposed there and back.
// CPU kernels: ops/cpu/softmax.cpp.
#include "rows.h"

namespace loom {

namespace {

// The primitive: softmax over the last dim.
Tensor softmax_last(const Tensor& x, const Tensor& mask) {
  Tensor out = detail::masked_rows("softmax", x, mask);
  Shape mask_shape = mask.defined() ? mask.shape() : Shape{};
  return record(
      "softmax", {x, mask}, out,
      [mask_shape](BackwardContext& c, const Tensor& g) -> detail::Grads {
        Tensor dx = softmax_backward(c.out(), g);
        return {c.needs(0) ? dx : Tensor(), c.needs(1) ? sum_to(dx, mask_shape) : Tensor()};
      },
      SavedOutput::yes);
}

}  // namespace

Tensor softmax(const Tensor& x, int64_t dim, const Tensor& mask, Where where) {
  CallSite site(where);
  return detail::along_dim("softmax", x, dim, mask, softmax_last);
}

Tensor softmax_backward(const Tensor& y, const Tensor& grad, Where where) {
  CallSite site(where);
  Tensor out = detail::row_backward("softmax_backward", y, grad);
  return record("softmax_backward", {y, grad}, out, [y, grad](BackwardContext& c, const Tensor& v) -> detail::Grads {
    Tensor dy;
    if (c.needs(0)) dy = sub(mul(v, sub(grad, sum(mul(grad, y), {-1}, true))), mul(grad, sum(mul(v, y), {-1}, true)));
    return {dy, c.needs(1) ? softmax_backward(y, v) : Tensor()};
  });
}

namespace {
// The compositions the matrix checks the fused op against.
Tensor softmax_composed(const Tensor& z, int64_t dim) {
  Tensor e = exp(z);
  return div(e, sum(e, {dim}, true));
}
}  // namespace

LOOM_OP(softmax){
    .name = "softmax",
    .formula = "y = exp(z - max z) / Σ exp(z - max z),  z = x + mask   (over dim)",
    .derivative = "dx = softmax_backward(y, g) = y·(g - Σ g·y)",
    .shape_rule = "y has x's shape",
    .call = [](const OpArgs& x) { return softmax(x[0]); },
    .samples = {{.inputs = {{{4, 7}}}, .label = "dim=-1", .attributes = {{"dim", int64_t{-1}}}},
                {.inputs = {{{2, 3, 5}}}, .label = "dim=-1", .attributes = {{"dim", int64_t{-1}}}},
                {.inputs = {{{2, 5, 3}}},
                 .label = "dim=1",
                 .composed = [](const OpArgs& x) { return softmax_composed(x[0], 1); },
                 .attributes = {{"dim", int64_t{1}}}},
                {.inputs = {{{3, 4, 5}}, {{4, 5}}},
                 .label = "additive mask [4,5]",
                 .composed = [](const OpArgs& x) { return softmax_composed(add(x[0], x[1]), -1); },
                 .attributes = {{"dim", int64_t{-1}}}},
                {.inputs = {{{2, 5, 3}}, {{5, 1}}},
                 .label = "dim=1, additive mask [5,1]",
                 .composed = [](const OpArgs& x) { return softmax_composed(add(x[0], x[1]), 1); },
                 .attributes = {{"dim", int64_t{1}}}},
                {{{{2, 4, 4}}},
                 [](const OpArgs& x) { return softmax(x[0], -1, causal_mask(4, x[0].device())); },
                 "causal bool mask",
                 [](const OpArgs& x) {
                   return softmax_composed(add(x[0], detail::causal_additive(4, x[0].device())), -1);
                 }}},
    .composed = [](const OpArgs& x) { return softmax_composed(x[0], -1); },
    .schema = "softmax(Tensor input, int dim, *, Tensor? mask=None) -> Tensor",
    .invoke =
        [](const Arguments& a) { return softmax(a.tensor("input"), a.integer("dim"), a.optional_tensor("mask")); },
};

LOOM_OP(softmax_backward){
    .name = "softmax_backward",
    .formula = "dx = y·(g - Σ g·y)",
    .derivative = "d/dg = softmax_backward(y, v);  d/dy = v·(g - Σ g·y) - g·Σ v·y",
    .shape_rule = "y's shape",
    .call = [](const OpArgs& x) { return softmax_backward(x[0], x[1]); },
    .samples = {binary_sample({4, 7}, {4, 7}), binary_sample({2, 3, 5}, {2, 3, 5})},
    .composed = [](const OpArgs& x) { return mul(x[0], sub(x[1], sum(mul(x[1], x[0]), {-1}, true))); },
};

}  // namespace loom
