// reshape(x, shape): the same elements in a new shape; a view when the strides
// allow it (always for contiguous x), otherwise a copy.    dx = reshape(g, x.shape)
// view(x, shape): like reshape but never copies (an error when it would have to).
#include <optional>

#include "elementwise.h"

namespace loom {

namespace {

Shape infer_shape(const Shape& shape, int64_t numel, std::string_view op, const Shape& from) {
  Shape out = shape;
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == -1) {
      LOOM_CHECK(infer < 0, "{}: only one dim can be -1 in {}", op, shape);
      infer = static_cast<int64_t>(i);
    } else {
      LOOM_CHECK(out[i] >= 0, "{}: invalid size {} in {}", op, out[i], shape);
      known *= out[i];
    }
  }
  if (infer >= 0) {
    LOOM_CHECK(known != 0 && numel % known == 0, "{}: shape {} is invalid for input of shape {} ({} elements)", op,
               shape, from, numel);
    out[infer] = numel / known;
  }
  LOOM_CHECK(shape_numel(out) == numel, "{}: shape {} is invalid for input of shape {} ({} elements)", op, shape, from,
             numel);
  return out;
}

// Strides that let `new_shape` view memory laid out as (shape, strides), if any
// exist: each run of old dims that is contiguous in memory can be re-split freely.
std::optional<Shape> view_strides(const Shape& shape, const Shape& strides, const Shape& new_shape) {
  Shape out(new_shape.size());
  if (shape_numel(shape) == 0 || shape.empty()) return contiguous_strides(new_shape);
  int64_t view_d = static_cast<int64_t>(new_shape.size()) - 1;
  int64_t chunk_base_stride = strides.empty() ? 1 : strides.back();
  int64_t tensor_numel = 1, view_numel = 1;
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
    tensor_numel *= shape[d];
    if (d == 0 || (shape[d - 1] != 1 && strides[d - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || new_shape[view_d] == 1)) {
        out[view_d] = view_numel * chunk_base_stride;
        view_numel *= new_shape[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return std::nullopt;
      if (d > 0) {
        chunk_base_stride = strides[d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return out;
}

Tensor view_impl(std::string_view op, const Tensor& x, const Shape& shape, bool allow_copy) {
  Shape target = infer_shape(shape, x.numel(), op, x.shape());
  if (auto strides = view_strides(x.shape(), x.strides(), target)) {
    Tensor out = Tensor::make_view(x, target, *strides, x.offset());
    Shape input_shape = x.shape();
    return record(op, {x}, out, [input_shape](BackwardContext&, const Tensor& g) -> detail::Grads {
      return {reshape(g, input_shape)};
    });
  }
  LOOM_CHECK(allow_copy, "view: shape {} cannot view a tensor of shape {} with strides {} without a copy; use reshape",
             shape, x.shape(), x.strides());
  return view_impl(op, contiguous(x), target, false);
}

}  // namespace

Tensor reshape(const Tensor& x, const Shape& shape, Where where) {
  CallSite site(where);
  return view_impl("reshape", x, shape, true);
}

Tensor view(const Tensor& x, const Shape& shape, Where where) {
  CallSite site(where);
  return view_impl("view", x, shape, false);
}

LOOM_OP(reshape){
    .name = "reshape",
    .formula = "y = x's elements, in order, in a new shape (a view when strides allow)",
    .derivative = "dx = reshape(g, x.shape)",
    .shape_rule = "same numel; one size may be -1",
    .call =
        [](const OpArgs& x) {
          return reshape(x[0], {7, 2, 2});
        },
    .samples = {{.inputs = {{{4, 7}}}, .label = "[4,7]->[7,2,2]", .attributes = {{"shape", Shape{7, 2, 2}}}},
                {.inputs = {{{2, 3}}}, .label = "[2,3]->[-1]", .attributes = {{"shape", Shape{-1}}}}},
    .schema = "reshape(Tensor input, int[] shape) -> Tensor",
    .invoke = [](const Arguments& a) { return reshape(a.tensor("input"), a.integers("shape")); },
};

LOOM_OP(view){
    .name = "view",
    .formula = "y = x's elements in a new shape, never copied",
    .derivative = "dx = reshape(g, x.shape)",
    .shape_rule = "same numel; one size may be -1",
    .call =
        [](const OpArgs& x) {
          return view(x[0], {2, -1});
        },
    .samples = {{.inputs = {{{2, 3, 4}}}, .label = "[2,3,4]->[2,-1]", .attributes = {{"size", Shape{2, -1}}}}},
    .variants = false,  // a transposed input cannot be viewed: that error is tested in test_views
    .schema = "view(Tensor input, int[] size) -> Tensor",
    .invoke = [](const Arguments& a) { return view(a.tensor("input"), a.integers("size")); },
};

}  // namespace loom
