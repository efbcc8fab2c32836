// gather(x, dim, index): out has index's shape and, for dim = 1,
//   out[i][j][k] = x[i][index[i][j][k]][k]
// index has x's number of dims, with index.size(d) <= x.size(d) for d != dim.
//   dx = scatter_add(zeros(x.shape), dim, index, g)   (repeated indices accumulate)
// CPU kernels: ops/cpu/gather.cpp.
#include "indexing.h"

namespace loom {

namespace {
void check_gather_shapes(std::string_view op, const Tensor& x, int64_t dim, const Tensor& index) {
  LOOM_CHECK(index.dim() == x.dim(), "{}: index of shape {} must have as many dims as the input of shape {}", op,
             index.shape(), x.shape());
  for (int64_t d = 0; d < x.dim(); ++d)
    LOOM_CHECK(d == dim || index.shape()[d] <= x.shape()[d],
               "{}: index of shape {} is larger than the input of shape {} in dim {}", op, index.shape(), x.shape(), d);
}
}  // namespace

Tensor gather(const Tensor& x, int64_t dim, const Tensor& index, Where where) {
  CallSite site(where);
  LOOM_CHECK(x.dim() >= 1, "gather: input must have at least 1 dim, got shape {}", x.shape());
  dim = wrap_dim(dim, x.dim(), "gather");
  Tensor idx = detail::index_values("gather", index, x);
  check_gather_shapes("gather", x, dim, idx);
  Tensor out = Tensor::empty(idx.shape(), {x.dtype(), x.device()});
  detail::kernel_for<kernels::IndexReadKernel>("gather", x)(out, x, dim, idx);  // checks the index values
  Shape input_shape = x.shape();
  return record("gather", {x}, out, [input_shape, dim, idx](BackwardContext&, const Tensor& g) -> detail::Grads {
    return {scatter_add(zeros(input_shape, {g.dtype(), g.device()}), dim, idx, g)};
  });
}

LOOM_OP(gather){
    .name = "gather",
    .formula = "y[i][j][k] = x[i][index[i][j][k]][k]   (dim = 1)",
    .derivative = "dx = scatter_add(zeros(x.shape), dim, index, g)",
    .shape_rule = "index's shape",
    .call = [](const OpArgs& x) { return gather(x[0], 0, x[1]); },
    .samples = {{.inputs = {{{4, 5}}, {{3, 5}, Domain::any, DType::i64, 4}},
                 .label = "dim=0",
                 .attributes = {{"dim", int64_t{0}}}},
                {.inputs = {{{3, 5}}, {{3, 7}, Domain::any, DType::i64, 5}},
                 .label = "dim=1, index wider than x",
                 .attributes = {{"dim", int64_t{1}}}},
                {.inputs = {{{4, 5}}, {{2, 3}, Domain::any, DType::i64, 5}},
                 .label = "dim=-1, index smaller",
                 .attributes = {{"dim", int64_t{-1}}}},
                {.inputs = {{{2, 3, 4}}, {{2, 5, 4}, Domain::any, DType::i64, 3}},
                 .label = "3-D dim=1",
                 .attributes = {{"dim", int64_t{1}}}}},
    .schema = "gather(Tensor input, int dim, Tensor index) -> Tensor",
    .invoke = [](const Arguments& a) { return gather(a.tensor("input"), a.integer("dim"), a.tensor("index")); },
};

}  // namespace loom
