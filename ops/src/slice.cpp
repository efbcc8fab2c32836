// slice(x, dim, start, end, step): every step-th index in [start, end), a view.
//   dx = slice_backward(g): zeros of x's shape with g written into the slice.
#include "elementwise.h"

namespace loom {

namespace {
struct SliceRange {
  int64_t start, end, length;
};

SliceRange clamp_slice(int64_t size, int64_t start, int64_t end, int64_t step) {
  // Python semantics: negative indices count from the end; out-of-range clamps.
  if (start < 0) start += size;
  if (end < 0) end += size;
  start = std::clamp<int64_t>(start, 0, size);
  end = std::clamp<int64_t>(end, start, size);
  return {start, end, (end - start + step - 1) / step};
}
}  // namespace

Tensor slice(const Tensor& x, int64_t dim, int64_t start, int64_t end, int64_t step, Where where) {
  CallSite site(where);
  dim = wrap_dim(dim, x.dim(), "slice");
  LOOM_CHECK(step > 0, "slice: step must be positive, got {}", step);
  SliceRange r = clamp_slice(x.shape()[dim], start, end, step);
  Shape sizes = x.shape(), strides = x.strides();
  sizes[dim] = r.length;
  strides[dim] *= step;
  Tensor out = Tensor::make_view(x, sizes, strides, x.offset() + r.start * x.strides()[dim]);
  Shape input_shape = x.shape();
  return record("slice", {x}, out, [input_shape, dim, r, step](BackwardContext&, const Tensor& g) -> detail::Grads {
    return {slice_backward(g, input_shape, dim, r.start, r.end, step)};
  });
}

Tensor slice_backward(const Tensor& grad, const Shape& input_shape, int64_t dim, int64_t start, int64_t end,
                      int64_t step, Where where) {
  CallSite site(where);
  Tensor out = zeros(input_shape, {grad.dtype(), grad.device()});
  {
    NoGradGuard no_grad;  // the copy into the slice is this op's kernel, not a graph node
    copy_(slice(out, dim, start, end, step), grad);
  }
  return record("slice_backward", {grad}, out,
                [dim, start, end, step](BackwardContext&, const Tensor& g) -> detail::Grads {
                  return {slice(g, dim, start, end, step)};
                });
}

// Composite: a slice of `length` indices from `start`.
Tensor narrow(const Tensor& x, int64_t dim, int64_t start, int64_t length, Where where) {
  CallSite site(where);
  int64_t d = wrap_dim(dim, x.dim(), "narrow");
  if (start < 0) start += x.shape()[d];
  LOOM_CHECK(start >= 0 && length >= 0 && start + length <= x.shape()[d],
             "narrow: [{}, {}) is out of range for dim {} of size {} (shape {})", start, start + length, d,
             x.shape()[d], x.shape());
  return slice(x, d, start, start + length, 1);
}

// Composite: one index of a dim, which is removed.
Tensor select(const Tensor& x, int64_t dim, int64_t index, Where where) {
  CallSite site(where);
  int64_t d = wrap_dim(dim, x.dim(), "select");
  int64_t size = x.shape()[d];
  LOOM_CHECK(index >= -size && index < size, "select: index {} is out of range for dim {} of size {} (shape {})", index,
             d, size, x.shape());
  if (index < 0) index += size;
  return squeeze(slice(x, d, index, index + 1, 1), d);
}

LOOM_OP(slice){
    .name = "slice",
    .formula = "y = x[start:end:step] along dim (a view)",
    .derivative = "dx = slice_backward(g): zeros of x's shape, g written into the slice",
    .shape_rule = "dim's size → ⌈(end - start)/step⌉",
    .call = [](const OpArgs& x) { return slice(x[0], 1, 1, 6, 2); },
    .samples = {unary_sample({4, 7}, Domain::any, "dim=1 [1:6:2]"),
                {{{{5, 3}}}, [](const OpArgs& x) { return slice(x[0], 0, -3, 5); }, "dim=0 [-3:]"}},
};

LOOM_OP(slice_backward){
    .name = "slice_backward",
    .formula = "dx = zeros(input_shape) with g written at [start:end:step] along dim",
    .derivative = "d/dg = slice(v, dim, start, end, step)",
    .shape_rule = "→ input_shape",
    .call =
        [](const OpArgs& x) {
          return slice_backward(x[0], {4, 7}, 1, 1, 6, 2);
        },
    .samples = {unary_sample({4, 3}, Domain::any, "into [4,7] dim=1 [1:6:2]")},
};

LOOM_OP(narrow){
    .name = "narrow",
    .formula = "y = x[start : start+length] along dim (a view)",
    .derivative = "dx = zeros of x's shape, g written at that range",
    .shape_rule = "dim's size → length",
    .call = [](const OpArgs& x) { return narrow(x[0], 0, 1, 2); },
    .samples = {{.inputs = {{{4, 7}}},
                 .label = "dim=0 [1,3)",
                 .attributes = {{"dim", int64_t{0}}, {"start", int64_t{1}}, {"length", int64_t{2}}}},
                {.inputs = {{{3, 5}}},
                 .label = "dim=-1 [-3,-1)",
                 .attributes = {{"dim", int64_t{-1}}, {"start", int64_t{-3}}, {"length", int64_t{2}}}}},
    .schema = "narrow(Tensor input, int dim, int start, int length) -> Tensor",
    .invoke =
        [](const Arguments& a) {
          return narrow(a.tensor("input"), a.integer("dim"), a.integer("start"), a.integer("length"));
        },
};

LOOM_OP(select){
    .name = "select",
    .formula = "y = x[index] along dim, the dim removed (a view)",
    .derivative = "dx = zeros of x's shape, g written at that index",
    .shape_rule = "x.shape without dim",
    .call = [](const OpArgs& x) { return select(x[0], 1, -1); },
    .samples = {{.inputs = {{{3, 4, 2}}},
                 .label = "dim=1 index=-1",
                 .attributes = {{"dim", int64_t{1}}, {"index", int64_t{-1}}}}},
    .schema = "select(Tensor input, int dim, int index) -> Tensor",
    .invoke = [](const Arguments& a) { return select(a.tensor("input"), a.integer("dim"), a.integer("index")); },
};

}  // namespace loom
