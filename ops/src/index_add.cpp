// index_add(self, dim, index, source): a copy of self with source's slices added
// at `index` (1-D, int64) along dim; repeated indices accumulate.
//   out[o][index[j]][i] += source[o][j][i]
//   dself = g            dsource = index_select(g, dim, index)
// index_select's gradient. CPU kernels: ops/cpu/index_add.cpp (deterministic:
// a thread owns whole output columns and adds into each in index order).
#include "indexing.h"

namespace loom {

Tensor index_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source, Where where) {
  CallSite site(where);
  detail::check_same_kind("index_add", self, source);
  detail::check_dtype("index_add", self, detail::DTypes::numeric);
  LOOM_CHECK(self.dim() >= 1, "index_add: self must have at least 1 dim, got shape {}", self.shape());
  dim = wrap_dim(dim, self.dim(), "index_add");
  LOOM_CHECK(index.dim() <= 1, "index_add: index must be 1-D, got shape {}", index.shape());
  Tensor idx = detail::index_values("index_add", index, self);
  Shape want = detail::with_dim(self.shape(), dim, idx.numel());
  LOOM_CHECK(source.shape() == want,
             "index_add: source of shape {} does not match self of shape {} with {} indices in dim {} (expected {})",
             source.shape(), self.shape(), idx.numel(), dim, want);
  Tensor out = Tensor::empty(self.shape(), {self.dtype(), self.device()});
  {
    NoGradGuard kernel_internals;
    copy_(out, self);
    detail::kernel_for<kernels::IndexAccumulateKernel>("index_add", self)(out, dim, idx, contiguous(source));
  }
  return record("index_add", {self, source}, out, [dim, idx](BackwardContext& c, const Tensor& g) -> detail::Grads {
    return {c.needs(0) ? g : Tensor(), c.needs(1) ? index_select(g, dim, idx) : Tensor()};
  });
}

LOOM_OP(index_add){
    .name = "index_add",
    .formula = "y = self;  y[.., index[j], ..] += source[.., j, ..] along dim",
    .derivative = "dself = g;  dsource = index_select(g, dim, index)",
    .shape_rule = "self's shape",
    .call = [](const OpArgs& x) { return index_add(x[0], 0, x[1], x[2]); },
    .samples = {{.inputs = {{{4, 5}}, {{6}, Domain::any, DType::i64, 4}, {{6, 5}}},
                 .label = "dim=0, repeated indices",
                 .attributes = {{"dim", int64_t{0}}}},
                {.inputs = {{{3, 5}}, {{2}, Domain::any, DType::i64, 5}, {{3, 2}}},
                 .label = "dim=1, alpha=-0.5",
                 .attributes = {{"dim", int64_t{1}}, {"alpha", -0.5}}},
                {.inputs = {{{2, 4, 3}}, {{5}, Domain::any, DType::i64, 4}, {{2, 5, 3}}},
                 .label = "3-D dim=-2",
                 .attributes = {{"dim", int64_t{-2}}}}},
    .schema = "index_add(Tensor input, int dim, Tensor index, Tensor source, *, float alpha=1.0) -> Tensor",
    .invoke =
        [](const Arguments& a) {
          const Tensor& source = a.tensor("source");
          const double alpha = a.number("alpha");
          return index_add(
              a.tensor("input"), a.integer("dim"), a.tensor("index"),
              alpha == 1.0 ? source : mul(source, scalar_tensor(alpha, {source.dtype(), source.device()})));
        },
};

}  // namespace loom
