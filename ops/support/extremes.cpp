#include "extremes.h"

namespace loom::detail {

Tensor extreme_over(std::string_view op, const Tensor& x, const Shape& dims, bool keepdim) {
  check_dtype(op, x, DTypes::numeric);
  Shape reduce_dims = kernels::normalize_dims(dims, x.dim(), op);
  for (int64_t d : reduce_dims)
    LOOM_CHECK(x.shape()[d] > 0, "{}: cannot reduce over dim {} of size 0 (shape {})", op, d, x.shape());
  Tensor out = Tensor::empty(kernels::reduced_shape(x.shape(), reduce_dims, keepdim), {x.dtype(), x.device()});
  kernel_for<kernels::ReduceKernel>(op, x)(out, x, reduce_dims);
  return record(
      op, {x}, out,
      [x, reduce_dims, keepdim](BackwardContext& c, const Tensor& g) -> Grads {
        Shape kept = kernels::reduced_shape(x.shape(), reduce_dims, true);
        Tensor weights;
        {
          NoGradGuard constant;  // where the extremes are: piecewise constant in x
          Tensor mask = to_dtype(eq(x, reshape(c.out().detach(), kept)), x.dtype());
          weights = div(mask, sum(mask, reduce_dims, true));
        }
        return {mul(expand(keepdim ? g : reshape(g, kept), x.shape()), weights)};
      },
      SavedOutput::yes);
}

Tensor extreme_index(std::string_view op, const Tensor& x, int64_t dim, bool keepdim) {
  check_dtype(op, x, DTypes::numeric);
  Shape dims;  // none on a 0-d tensor: its one element is at index 0
  if (std::optional<int64_t> d = wrap_dim_or_scalar(dim, x.dim(), op)) dims = {*d};
  for (int64_t d : dims)
    LOOM_CHECK(x.shape()[d] > 0, "{}: cannot reduce over dim {} of size 0 (shape {})", op, d, x.shape());
  Tensor out = Tensor::empty(kernels::reduced_shape(x.shape(), dims, keepdim), {DType::i64, x.device()});
  kernel_for<kernels::ReduceKernel>(op, x)(out, x, dims);
  return out;  // integer: recorded by nobody
}

Tensor flat_or_along(std::string_view op, const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  if (dim) return extreme_index(op, x, *dim, keepdim);
  const Tensor flat = extreme_index(op, reshape(x, {-1}), 0, false);
  return keepdim ? reshape(flat, Shape(static_cast<size_t>(x.dim()), 1)) : flat;
}

ValuesAndIndices extreme_along(std::string_view op, std::string_view index_op, const Tensor& x, int64_t dim,
                               bool keepdim) {
  std::optional<int64_t> d = wrap_dim_or_scalar(dim, x.dim(), op);
  if (!d) return {x, extreme_index(index_op, x, dim, keepdim)};  // a 0-d tensor is its own extreme, at index 0
  Tensor indices = extreme_index(index_op, x, *d, true);
  Tensor values = gather(x, *d, indices);
  if (!keepdim) return {squeeze(values, *d), squeeze(indices, *d)};
  return {values, indices};
}

std::vector<Sample> extreme_index_samples() {
  return {{.inputs = {{{4, 7}}}, .label = "dim=1", .attributes = {{"dim", int64_t{1}}}},
          {.inputs = {{{2, 3, 5}}}, .label = "dim=0 keepdim", .attributes = {{"dim", int64_t{0}}, {"keepdim", true}}},
          {.inputs = {{{3, 40}}}, .label = "dim=-1", .attributes = {{"dim", int64_t{-1}}}},
          {.inputs = {{{3, 4}}}, .label = "flattened", .attributes = {{"dim", std::monostate{}}}}};
}

}  // namespace loom::detail
