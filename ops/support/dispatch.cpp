// The shared shell of the elementwise ops: checks, output, one kernel lookup.
#include <cmath>

#include "elementwise.h"

namespace loom::detail {

void check_dtype(std::string_view op, const Tensor& t, DTypes allowed) {
  switch (allowed) {
    case DTypes::floating:
      LOOM_CHECK(is_floating(t.dtype()), "{}: expected a floating dtype (float32, float64 or bfloat16), got {}", op,
                 dtype_name(t.dtype()));
      break;
    case DTypes::numeric:
      LOOM_CHECK(t.dtype() != DType::b8, "{}: expected a numeric dtype, got {}", op, dtype_name(t.dtype()));
      break;
    case DTypes::all: break;
  }
}

DType result_type(const Tensor& a, const Tensor& b) {
  if (dtype_kind(a.dtype()) == dtype_kind(b.dtype()) && (a.dim() == 0) != (b.dim() == 0))
    return a.dim() == 0 ? b.dtype() : a.dtype();
  return promote_types(a.dtype(), b.dtype());
}

DType floating_result_type(const Tensor& a, const Tensor& b) {
  const DType result = result_type(a, b);
  return is_floating(result) ? result : DType::f32;
}

Tensor call_promoted(BinaryFn op, const Tensor& a, const Tensor& b, DType dtype, Where where) {
  return op(to_dtype(a, dtype), to_dtype(b, dtype), where);
}

Tensor times_alpha(const Tensor& other, double alpha, std::string_view op) {
  if (alpha == 1) return other;
  LOOM_CHECK(is_floating(other.dtype()) || alpha == std::trunc(alpha),
             "{}: alpha {} must be an integer for the {} operand (as in PyTorch)", op, alpha,
             dtype_name(other.dtype()));
  return mul(other, constant_like(other, alpha));
}

Tensor unary_op(std::string_view op, const Tensor& x, DTypes allowed, kernels::Scalars scalars) {
  check_dtype(op, x, allowed);
  Tensor out = Tensor::empty(x.shape(), {x.dtype(), x.device()});
  kernel_for<kernels::UnaryKernel>(op, x)(out, x, scalars);
  return out;
}

Tensor binary_op(std::string_view op, const Tensor& a, const Tensor& b, DTypes allowed) {
  check_same_kind(op, a, b);
  check_dtype(op, a, allowed);
  Tensor out = Tensor::empty(kernels::broadcast_shapes(a.shape(), b.shape(), op), {a.dtype(), a.device()});
  kernel_for<kernels::BinaryKernel>(op, a)(out, a, b);
  return out;
}

Tensor compare_op(std::string_view op, const Tensor& a, const Tensor& b) {
  check_same_kind(op, a, b);
  Tensor out = Tensor::empty(kernels::broadcast_shapes(a.shape(), b.shape(), op), {DType::b8, a.device()});
  kernel_for<kernels::BinaryKernel>(op, a)(out, a, b);
  return out;
}

}  // namespace loom::detail
