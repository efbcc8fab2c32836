#pragma once
// The op side of the fused last-dim ops (softmax, log_softmax): input and mask
// checks, dense inputs, any dim moved last, one kernel lookup. Their CPU kernels
// live in ops/cpu (row_loops.h, row_sums.h, row_mask.h, short_rows.h).
#include "elementwise.h"

namespace loom::detail {

// x as dense row-major memory, outside autograd: row kernels take dense rows.
// A copy is made only for strided or expanded views.
inline Tensor dense(const Tensor& x) {
  if (!x.defined() || x.is_contiguous()) return x;
  NoGradGuard no_grad;
  return contiguous(x.detach());
}

inline void check_row_input(std::string_view op, const Tensor& x) {
  LOOM_CHECK(is_floating(x.dtype()), "{}: expected float32 or float64, got {}", op, dtype_name(x.dtype()));
  LOOM_CHECK(x.dim() >= 1, "{}: expected at least 1 dim, got a 0-d tensor", op);
}

// A mask for x's rows: bool (true = masked) or x's float dtype (additive),
// broadcastable to x's shape, on x's device.
inline void check_row_mask(std::string_view op, const Tensor& mask, const Tensor& x) {
  if (!mask.defined()) return;
  LOOM_CHECK(mask.device() == x.device(), "{}: mask is on {} and the input on {}", op, mask.device(), x.device());
  LOOM_CHECK(mask.dtype() == DType::b8 || mask.dtype() == x.dtype(),
             "{}: mask must be bool (true = masked) or {} like the input (additive), got {}", op, dtype_name(x.dtype()),
             dtype_name(mask.dtype()));
  LOOM_CHECK(mask.dim() <= x.dim() && kernels::broadcast_shapes(x.shape(), mask.shape(), op) == x.shape(),
             "{}: mask of shape {} cannot be broadcast to the input's shape {}", op, mask.shape(), x.shape());
}

// out = op's MaskedRowsKernel over the rows of x (last dim) under `mask`.
inline Tensor masked_rows(std::string_view op, const Tensor& x, const Tensor& mask) {
  check_row_input(op, x);
  check_row_mask(op, mask, x);
  Tensor out = Tensor::empty(x.shape(), {x.dtype(), x.device()});
  kernel_for<kernels::MaskedRowsKernel>(op, x)(out, dense(x), mask);
  return out;
}

// Moves `dim` to the end (a transposed view) so a last-dim kernel can run over it.
inline Tensor move_to_last(const Tensor& t, int64_t dim) { return dim == t.dim() - 1 ? t : transpose(t, dim, -1); }

// A last-dim row op applied along any `dim`: moved last (mask too) and back.
template <typename LastDimOp>
Tensor along_dim(std::string_view op, const Tensor& x, int64_t dim, const Tensor& mask, LastDimOp last_dim_op) {
  check_row_input(op, x);
  int64_t d = wrap_dim(dim, x.dim(), op);
  if (d == x.dim() - 1) return last_dim_op(x, mask);
  check_row_mask(op, mask, x);  // before moving dims, so the message shows the caller's shapes
  Tensor m = mask.defined() ? move_to_last(expand(mask, x.shape()), d) : mask;
  return move_to_last(last_dim_op(move_to_last(x, d), m), d);
}

// out = op's RowBackwardKernel(y, grad), inputs checked and made dense.
inline Tensor row_backward(std::string_view op, const Tensor& y, const Tensor& grad) {
  check_row_input(op, y);
  check_same_kind(op, y, grad);
  LOOM_CHECK(y.shape() == grad.shape(), "{}: y has shape {} but grad has shape {}", op, y.shape(), grad.shape());
  Tensor out = Tensor::empty(y.shape(), {y.dtype(), y.device()});
  kernel_for<kernels::RowBackwardKernel>(op, y)(out, dense(y), dense(grad));
  return out;
}

// ---- sample helpers for the registrations ----
// loom::causal_mask(t) as an additive float64 mask on `device`: 0 where visible, -inf where masked.
inline Tensor causal_additive(int64_t t, Device device = kCPU) {
  NoGradGuard no_grad;
  Tensor zero = zeros({t, t}, {DType::f64, device});
  return masked_fill(zero, causal_mask(t, device), -std::numeric_limits<double>::infinity());
}

}  // namespace loom::detail
