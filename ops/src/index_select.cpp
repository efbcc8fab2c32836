// index_select(x, dim, index): the slices of x at `index` (1-D, int64) along dim;
// out.shape = x.shape with dim replaced by index.numel().
//   out[o][j][i] = x[o][index[j]][i]        dx = index_add(zeros(x.shape), dim, index, g)
// CPU kernels: ops/cpu/index_select.cpp.
#include "indexing.h"

namespace loom {

Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index, Where where) {
  CallSite site(where);
  LOOM_CHECK(x.dim() >= 1, "index_select: input must have at least 1 dim, got shape {}", x.shape());
  dim = wrap_dim(dim, x.dim(), "index_select");
  LOOM_CHECK(index.dim() <= 1, "index_select: index must be 1-D, got shape {}", index.shape());
  Tensor idx = detail::index_values("index_select", index, x);
  Tensor out = Tensor::empty(detail::with_dim(x.shape(), dim, idx.numel()), {x.dtype(), x.device()});
  detail::kernel_for<kernels::IndexReadKernel>("index_select", x)(out, x, dim, idx);  // checks the index values
  Shape input_shape = x.shape();
  return record("index_select", {x}, out, [input_shape, dim, idx](BackwardContext&, const Tensor& g) -> detail::Grads {
    return {index_add(zeros(input_shape, {g.dtype(), g.device()}), dim, idx, g)};
  });
}

LOOM_OP(index_select){
    .name = "index_select",
    .formula = "y[.., j, ..] = x[.., index[j], ..] along dim",
    .derivative = "dx = index_add(zeros(x.shape), dim, index, g)",
    .shape_rule = "x.shape with dim's size → index.numel()",
    .call = [](const OpArgs& x) { return index_select(x[0], 0, x[1]); },
    .samples = {{.inputs = {{{4, 5}}, {{6}, Domain::any, DType::i64, 4}},
                 .label = "dim=0, repeated indices",
                 .attributes = {{"dim", int64_t{0}}}},
                {.inputs = {{{3, 5}}, {{4}, Domain::any, DType::i64, 5}},
                 .label = "dim=1",
                 .attributes = {{"dim", int64_t{1}}}},
                {.inputs = {{{2, 5, 3}}, {{3}, Domain::any, DType::i64, 5}},
                 .label = "3-D dim=-2",
                 .attributes = {{"dim", int64_t{-2}}}}},
    .schema = "index_select(Tensor input, int dim, Tensor index) -> Tensor",
    .invoke = [](const Arguments& a) { return index_select(a.tensor("input"), a.integer("dim"), a.tensor("index")); },
};

}  // namespace loom
