// masked_fill(x, mask, value) = mask ? value : x, mask bool and broadcast to x's shape.
// Composite: where(mask, value, x). Its gradient comes from where's:
//   dx = where(mask, 0, g): zero where masked.
#include "elementwise.h"

namespace loom {

Tensor masked_fill(const Tensor& x, const Tensor& mask, double value, Where where) {
  CallSite site(where);
  LOOM_CHECK(mask.dtype() == DType::b8, "masked_fill: mask must be bool, got {} (compare with eq/lt/... to get one)",
             dtype_name(mask.dtype()));
  // Unlike where, the output keeps x's shape: the mask may not grow it.
  Shape shape = kernels::broadcast_shapes(x.shape(), mask.shape(), "masked_fill");
  LOOM_CHECK(shape == x.shape(), "masked_fill: mask of shape {} cannot be broadcast to input shape {}", mask.shape(),
             x.shape());
  return loom::where(mask, detail::constant_like(x, value), x);
}

static InputSpec bool_input(Shape shape) { return {std::move(shape), Domain::any, DType::b8, 2, false}; }

LOOM_OP(masked_fill){
    .name = "masked_fill",
    .formula = "y = mask ? value : x",
    .derivative = "dx = where(mask, 0, g)",
    .shape_rule = "x's shape (mask broadcast to it)",
    .call = [](const OpArgs& x) { return masked_fill(x[0], x[1], -1e9); },
    .samples = {{.inputs = {{{4, 7}}, bool_input({4, 7})},
                 .label = "mask [4,7], -1e9",
                 .attributes = {{"value", -1e9}}},
                {.inputs = {{{4, 7}}, bool_input({7})}, .label = "mask [7]", .attributes = {{"value", 0.5}}},
                {.inputs = {{{2, 3, 5}}, bool_input({3, 5})}, .label = "mask [3,5]", .attributes = {{"value", 0.0}}}},
    .schema = "masked_fill(Tensor input, Tensor mask, float value) -> Tensor",
    .invoke = [](const Arguments& a) { return masked_fill(a.tensor("input"), a.tensor("mask"), a.number("value")); },
};

}  // namespace loom
