// sum(x, dims, keepdim) = sum of x over dims     dx = g broadcast back to x's shape
// CPU kernels: ops/cpu/sum.cpp.
#include "elementwise.h"

namespace loom {

Tensor sum(const Tensor& x, const Shape& dims, bool keepdim, Where where) {
  CallSite site(where);
  detail::check_dtype("sum", x, detail::DTypes::numeric);
  Shape reduce_dims = kernels::normalize_dims(dims, x.dim(), "sum");
  Tensor out = Tensor::empty(kernels::reduced_shape(x.shape(), reduce_dims, keepdim), {x.dtype(), x.device()});
  detail::kernel_for<kernels::ReduceKernel>("sum", x)(out, x, reduce_dims);
  Shape input_shape = x.shape();
  return record("sum", {x}, out,
                [input_shape, reduce_dims, keepdim](BackwardContext&, const Tensor& g) -> detail::Grads {
                  Shape kept = kernels::reduced_shape(input_shape, reduce_dims, true);
                  return {expand(keepdim ? g : reshape(g, kept), input_shape)};
                });
}

Tensor sum_to(const Tensor& x, const Shape& shape, Where where) {
  if (x.shape() == shape) return x;
  CallSite site(where);
  LOOM_CHECK(x.dim() >= static_cast<int64_t>(shape.size()), "sum_to: cannot reduce shape {} to {}", x.shape(), shape);
  size_t lead = x.dim() - shape.size();
  Shape dims;
  for (size_t d = 0; d < static_cast<size_t>(x.dim()); ++d) {
    if (d < lead)
      dims.push_back(static_cast<int64_t>(d));
    else if (shape[d - lead] == 1 && x.shape()[d] != 1)
      dims.push_back(static_cast<int64_t>(d));
    else
      LOOM_CHECK(shape[d - lead] == x.shape()[d], "sum_to: cannot reduce shape {} to {}", x.shape(), shape);
  }
  Tensor reduced = dims.empty() ? x : sum(x, dims, true);
  return reshape(reduced, shape);
}

Tensor mean(const Tensor& x, const Shape& dims, bool keepdim, Where where) {
  // Composite: sum / count. Its gradient comes from sum's and mul's.
  CallSite site(where);
  Shape reduce_dims = kernels::normalize_dims(dims, x.dim(), "mean");
  int64_t count = 1;
  for (int64_t d : reduce_dims) count *= x.shape()[d];
  LOOM_CHECK(is_floating(x.dtype()), "mean: expected a floating dtype, got {}", dtype_name(x.dtype()));
  return mul(sum(x, reduce_dims, keepdim), scalar_tensor(1.0 / static_cast<double>(count), {x.dtype(), x.device()}));
}

LOOM_OP(sum){
    .name = "sum",
    .formula = "y = Σ x over dims",
    .derivative = "dx = g broadcast back to x.shape",
    .shape_rule = "x.shape without dims (size 1 each if keepdim)",
    .call = [](const OpArgs& x) { return sum(x[0]); },
    .samples =
        {unary_sample({4, 7}, Domain::any, "all"),
         {.inputs = {{{4, 7}}}, .label = "dims={1}", .attributes = {{"dim", Shape{1}}}},
         {.inputs = {{{4, 7}}}, .label = "dims={0} keepdim", .attributes = {{"dim", Shape{0}}, {"keepdim", true}}},
         {.inputs = {{{2, 3, 5}}}, .label = "dims={0,2}", .attributes = {{"dim", Shape{0, 2}}}},
         {.inputs = {{{2, 3, 5}}}, .label = "dims={-1} keepdim", .attributes = {{"dim", Shape{-1}}, {"keepdim", true}}},
         // the fast paths' vector lanes, blocks and tails (rows of 70; a column sum of 20 rows)
         {.inputs = {{{3, 70}}}, .label = "[3,70] dims={1}", .attributes = {{"dim", Shape{1}}}},
         {.inputs = {{{20, 70}}}, .label = "[20,70] dims={0}", .attributes = {{"dim", Shape{0}}}}},
    .schema = "sum(Tensor input, int[1]? dim=None, bool keepdim=False) -> Tensor",
    .invoke = [](const Arguments& a) { return sum(a.tensor("input"), a.integers("dim"), a.boolean("keepdim")); },
};

LOOM_OP(mean){
    .name = "mean",
    .formula = "y = Σ x over dims / N   (N = elements per output)",
    .derivative = "dx = g/N broadcast back to x.shape",
    .shape_rule = "x.shape without dims (size 1 each if keepdim)",
    .call = [](const OpArgs& x) { return mean(x[0]); },
    .samples = {unary_sample({4, 7}, Domain::any, "all"),
                {.inputs = {{{2, 3, 5}}},
                 .label = "dims={1} keepdim",
                 .attributes = {{"dim", Shape{1}}, {"keepdim", true}}}},
    .schema = "mean(Tensor input, int[1]? dim=None, bool keepdim=False) -> Tensor",
    .invoke = [](const Arguments& a) { return mean(a.tensor("input"), a.integers("dim"), a.boolean("keepdim")); },
};

LOOM_OP(sum_to){
    .name = "sum_to",
    .formula = "y = x summed over the dims that broadcasting added or expanded",
    .derivative = "dx = expand(g, x.shape)",
    .shape_rule = "→ the given shape (x must broadcast from it)",
    .call =
        [](const OpArgs& x) {
          return sum_to(x[0], {3, 1});
        },
    .samples = {unary_sample({2, 3, 4}, Domain::any, "[2,3,4]->[3,1]")},
};

}  // namespace loom
