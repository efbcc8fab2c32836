// permute(x, dims): reorders dims, a view.     dx = permute(g, inverse(dims))
#include "elementwise.h"

namespace loom {

Tensor permute(const Tensor& x, const Shape& dims, Where where) {
  CallSite site(where);
  LOOM_CHECK(static_cast<int64_t>(dims.size()) == x.dim(), "permute: {} dims given for a tensor of shape {}",
             dims.size(), x.shape());
  Shape sizes(dims.size()), strides(dims.size()), inverse(dims.size());
  std::vector<bool> seen(dims.size(), false);
  for (size_t i = 0; i < dims.size(); ++i) {
    int64_t d = wrap_dim(dims[i], x.dim(), "permute");
    LOOM_CHECK(!seen[d], "permute: dim {} repeated in {}", d, dims);
    seen[d] = true;
    sizes[i] = x.shape()[d];
    strides[i] = x.strides()[d];
    inverse[d] = static_cast<int64_t>(i);
  }
  Tensor out = Tensor::make_view(x, sizes, strides, x.offset());
  return record("permute", {x}, out,
                [inverse](BackwardContext&, const Tensor& g) -> detail::Grads { return {permute(g, inverse)}; });
}

// Composite: a permutation that swaps two dims.
Tensor transpose(const Tensor& x, int64_t dim0, int64_t dim1, Where where) {
  CallSite site(where);
  Shape dims(x.dim());
  for (int64_t d = 0; d < x.dim(); ++d) dims[d] = d;
  std::swap(dims[wrap_dim(dim0, x.dim(), "transpose")], dims[wrap_dim(dim1, x.dim(), "transpose")]);
  return permute(x, dims);
}

LOOM_OP(permute){
    .name = "permute",
    .formula = "y = x with its dims reordered (a view)",
    .derivative = "dx = permute(g, inverse(dims))",
    .shape_rule = "y.shape[i] = x.shape[dims[i]]",
    .call =
        [](const OpArgs& x) {
          return permute(x[0], {2, 0, 1});
        },
    .samples = {{.inputs = {{{2, 3, 4}}}, .label = "{2,0,1}", .attributes = {{"dims", Shape{2, 0, 1}}}},
                {.inputs = {{{2, 3, 4}}}, .label = "{-1,0,-2}", .attributes = {{"dims", Shape{-1, 0, -2}}}}},
    .schema = "permute(Tensor input, int[] dims) -> Tensor",
    .invoke = [](const Arguments& a) { return permute(a.tensor("input"), a.integers("dims")); },
};

LOOM_OP(transpose){
    .name = "transpose",
    .formula = "y = x with dims d0 and d1 swapped (a view)",
    .derivative = "dx = transpose(g, d0, d1)",
    .shape_rule = "x.shape with d0 and d1 swapped",
    .call = [](const OpArgs& x) { return transpose(x[0], 0, 1); },
    .samples = {{.inputs = {{{4, 7}}}, .label = "0<->1", .attributes = {{"dim0", int64_t{0}}, {"dim1", int64_t{1}}}},
                {.inputs = {{{2, 3, 4}}},
                 .label = "-1<->0",
                 .attributes = {{"dim0", int64_t{-1}}, {"dim1", int64_t{0}}}}},
    .schema = "transpose(Tensor input, int dim0, int dim1) -> Tensor",
    .invoke = [](const Arguments& a) { return transpose(a.tensor("input"), a.integer("dim0"), a.integer("dim1")); },
};

}  // namespace loom
