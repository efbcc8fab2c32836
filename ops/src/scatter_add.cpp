// scatter_add(self, dim, index, src): a copy of self with src added at index along
// dim; for dim = 1:   out[i][index[i][j][k]][k] += src[i][j][k]
// src has index's shape; index.size(d) <= self.size(d) for d != dim.
//   dself = g            dsrc = gather(g, dim, index)
// gather's gradient. CPU kernels: ops/cpu/scatter_add.cpp (deterministic: a
// thread owns whole output columns and adds into each in index order).
#include "indexing.h"

namespace loom {

Tensor scatter_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src, Where where) {
  CallSite site(where);
  detail::check_same_kind("scatter_add", self, src);
  detail::check_dtype("scatter_add", self, detail::DTypes::numeric);
  LOOM_CHECK(self.dim() >= 1, "scatter_add: self must have at least 1 dim, got shape {}", self.shape());
  dim = wrap_dim(dim, self.dim(), "scatter_add");
  Tensor idx = detail::index_values("scatter_add", index, self);
  LOOM_CHECK(src.shape() == idx.shape(), "scatter_add: src of shape {} must have the index's shape {}", src.shape(),
             idx.shape());
  LOOM_CHECK(idx.dim() == self.dim(), "scatter_add: index of shape {} must have as many dims as self of shape {}",
             idx.shape(), self.shape());
  for (int64_t d = 0; d < self.dim(); ++d)
    LOOM_CHECK(d == dim || idx.shape()[d] <= self.shape()[d],
               "scatter_add: index of shape {} is larger than self of shape {} in dim {}", idx.shape(), self.shape(),
               d);
  Tensor out = Tensor::empty(self.shape(), {self.dtype(), self.device()});
  {
    NoGradGuard kernel_internals;
    copy_(out, self);
    detail::kernel_for<kernels::IndexAccumulateKernel>("scatter_add", self)(out, dim, idx, contiguous(src));
  }
  return record("scatter_add", {self, src}, out, [dim, idx](BackwardContext& c, const Tensor& g) -> detail::Grads {
    return {c.needs(0) ? g : Tensor(), c.needs(1) ? gather(g, dim, idx) : Tensor()};
  });
}

LOOM_OP(scatter_add){
    .name = "scatter_add",
    .formula = "y = self;  y[i][index[i][j][k]][k] += src[i][j][k]   (dim = 1)",
    .derivative = "dself = g;  dsrc = gather(g, dim, index)",
    .shape_rule = "self's shape; src has index's shape",
    .call = [](const OpArgs& x) { return scatter_add(x[0], 0, x[1], x[2]); },
    .samples = {{.inputs = {{{4, 5}}, {{6, 5}, Domain::any, DType::i64, 4}, {{6, 5}}},
                 .label = "dim=0, repeated indices",
                 .attributes = {{"dim", int64_t{0}}}},
                {.inputs = {{{3, 5}}, {{2, 4}, Domain::any, DType::i64, 5}, {{2, 4}}},
                 .label = "dim=-1, index smaller",
                 .attributes = {{"dim", int64_t{-1}}}},
                {.inputs = {{{2, 3, 4}}, {{2, 5, 4}, Domain::any, DType::i64, 3}, {{2, 5, 4}}},
                 .label = "3-D dim=1",
                 .attributes = {{"dim", int64_t{1}}}}},
    .schema = "scatter_add(Tensor input, int dim, Tensor index, Tensor src) -> Tensor",
    .invoke =
        [](const Arguments& a) {
          return scatter_add(a.tensor("input"), a.integer("dim"), a.tensor("index"), a.tensor("src"));
        },
};

}  // namespace loom
