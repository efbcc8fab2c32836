// cat(tensors, dim): the tensors one after another along dim (all other dims equal).
//   d tensors[k] = narrow(g, dim, offset_k, size_k)     (offset_k = sum of earlier sizes)
// stack(tensors, dim): composite, cat of unsqueeze(t, dim).
// CPU kernels: ops/cpu/cat.cpp.
#include "elementwise.h"

namespace loom {

Tensor cat(const std::vector<Tensor>& tensors, int64_t dim, Where where) {
  CallSite site(where);
  LOOM_CHECK(!tensors.empty(), "cat: expected at least one tensor");
  const Tensor& first = tensors[0];
  LOOM_CHECK(first.dim() >= 1, "cat: zero-dimensional tensor (shape {}) cannot be concatenated", first.shape());
  dim = wrap_dim(dim, first.dim(), "cat");
  Shape out_shape = first.shape();
  out_shape[dim] = 0;
  for (size_t k = 0; k < tensors.size(); ++k) {
    const Tensor& t = tensors[k];
    detail::check_same_kind("cat", first, t);
    bool match = t.dim() == first.dim();
    for (int64_t d = 0; match && d < t.dim(); ++d) match = d == dim || t.shape()[d] == first.shape()[d];
    LOOM_CHECK(match, "cat: tensor {} has shape {} but tensor 0 has shape {}; all dims except dim {} must match", k,
               t.shape(), first.shape(), dim);
    out_shape[dim] += t.shape()[dim];
  }
  Tensor out = Tensor::empty(out_shape, {first.dtype(), first.device()});
  detail::kernel_for<kernels::CatKernel>("cat", first)(out, tensors, dim);
  Shape sizes;
  for (const Tensor& t : tensors) sizes.push_back(t.shape()[dim]);
  return record("cat", tensors, out, [dim, sizes](BackwardContext& c, const Tensor& g) -> detail::Grads {
    detail::Grads grads;
    int64_t offset = 0;
    for (size_t k = 0; k < sizes.size(); ++k) {
      grads.push_back(c.needs(k) ? narrow(g, dim, offset, sizes[k]) : Tensor());
      offset += sizes[k];
    }
    return grads;
  });
}

Tensor stack(const std::vector<Tensor>& tensors, int64_t dim, Where where) {
  CallSite site(where);
  LOOM_CHECK(!tensors.empty(), "stack: expected at least one tensor");
  for (size_t k = 1; k < tensors.size(); ++k)
    LOOM_CHECK(tensors[k].shape() == tensors[0].shape(),
               "stack: tensor {} has shape {} but tensor 0 has shape {}; all must be equal", k, tensors[k].shape(),
               tensors[0].shape());
  int64_t d = wrap_dim(dim, tensors[0].dim() + 1, "stack");
  std::vector<Tensor> unsqueezed;
  for (const Tensor& t : tensors) unsqueezed.push_back(unsqueeze(t, d));
  return cat(unsqueezed, d);
}

LOOM_OP(cat){
    .name = "cat",
    .formula = "y = t₀, t₁, … one after another along dim",
    .derivative = "dt_k = narrow(g, dim, offset_k, size_k)",
    .shape_rule = "equal shapes but dim; sizes along dim add up",
    .call =
        [](const OpArgs& x) {
          return cat({x[0], x[1], x[2]}, 1);
        },
    .samples = {{.inputs = {{{2, 3}}, {{2, 1}}, {{2, 4}}},
                 .label = "3 tensors dim=1",
                 .attributes = {{"dim", int64_t{1}}}},
                {.inputs = {{{1, 3}}, {{2, 3}}}, .label = "dim=0"},
                {{{{2, 3, 2}}, {{2, 3, 3}}},
                 [](const OpArgs& x) {
                   return cat({x[0], x[1], x[0]}, -1);
                 },
                 "dim=-1, an input used twice"}},
    .schema = "cat(Tensor[] tensors, int dim=0) -> Tensor",
    .invoke = [](const Arguments& a) { return cat(a.tensors("tensors"), a.integer("dim")); },
};

LOOM_OP(stack){
    .name = "stack",
    .formula = "y = cat(unsqueeze(t_k, dim))",
    .derivative = "dt_k = select(g, dim, k)",
    .shape_rule = "n equal shapes → a new dim of size n at dim",
    .call =
        [](const OpArgs& x) {
          return stack({x[0], x[1], x[2]}, 1);
        },
    .samples = {{.inputs = {{{2, 3}}, {{2, 3}}, {{2, 3}}},
                 .label = "3 tensors dim=1",
                 .attributes = {{"dim", int64_t{1}}}},
                {.inputs = {{{4}}, {{4}}}, .label = "1-D dim=-1", .attributes = {{"dim", int64_t{-1}}}}},
    .schema = "stack(Tensor[] tensors, int dim=0) -> Tensor",
    .invoke = [](const Arguments& a) { return stack(a.tensors("tensors"), a.integer("dim")); },
};

}  // namespace loom
