// squeeze(x, dim) removes a size-1 dim; unsqueeze(x, dim) inserts one.
// Composites of view: their gradients come from view's.
#include "elementwise.h"

namespace loom {

Tensor squeeze(const Tensor& x, int64_t dim, Where where) {
  CallSite site(where);
  std::optional<int64_t> d = wrap_dim_or_scalar(dim, x.dim(), "squeeze");
  if (!d || x.shape()[*d] != 1) return x;  // as in PyTorch: squeezing a non-1 dim (or a 0-d tensor) is a no-op
  Shape shape = x.shape();
  shape.erase(shape.begin() + *d);
  return view(x, shape);
}

Tensor unsqueeze(const Tensor& x, int64_t dim, Where where) {
  CallSite site(where);
  int64_t d = wrap_dim(dim, x.dim() + 1, "unsqueeze");
  Shape shape = x.shape();
  shape.insert(shape.begin() + d, 1);
  return view(x, shape);
}

LOOM_OP(squeeze){
    .name = "squeeze",
    .formula = "y = x without its size-1 dim (a view)",
    .derivative = "dx = reshape(g, x.shape)",
    .shape_rule = "x.shape without dim",
    .call = [](const OpArgs& x) { return squeeze(x[0], 1); },
    .samples = {{.inputs = {{{3, 1, 4}}}, .label = "dim=1", .attributes = {{"dim", int64_t{1}}}},
                {.inputs = {{{3, 1, 4}}}, .label = "dim=0 (not 1: unchanged)", .attributes = {{"dim", int64_t{0}}}},
                {.inputs = {{{1, 3, 1}}}, .label = "every size-1 dim"}},
    .schema = "squeeze(Tensor input, int? dim=None) -> Tensor",
    .invoke =
        [](const Arguments& a) {
          const Tensor& x = a.tensor("input");
          if (auto dim = a.optional_integer("dim")) return squeeze(x, *dim);
          Shape kept;  // every size-1 dim
          for (int64_t size : x.shape())
            if (size != 1) kept.push_back(size);
          return reshape(x, kept);
        },
};

LOOM_OP(unsqueeze){
    .name = "unsqueeze",
    .formula = "y = x with a new size-1 dim (a view)",
    .derivative = "dx = reshape(g, x.shape)",
    .shape_rule = "x.shape with a 1 inserted at dim",
    .call = [](const OpArgs& x) { return unsqueeze(x[0], -1); },
    .samples = {{.inputs = {{{3, 4}}}, .label = "dim=-1", .attributes = {{"dim", int64_t{-1}}}},
                {.inputs = {{{3, 4}}}, .label = "dim=1", .attributes = {{"dim", int64_t{1}}}}},
    .schema = "unsqueeze(Tensor input, int dim) -> Tensor",
    .invoke = [](const Arguments& a) { return unsqueeze(a.tensor("input"), a.integer("dim")); },
};

}  // namespace loom
