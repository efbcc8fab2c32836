#pragma once
// What every in-place parameter update checks before its kernel runs.
#include "elementwise.h"

namespace loom::detail {

// Each of `tensors` (undefined ones skipped) is contiguous, of w's shape, dtype and device.
inline void check_update_operands(std::string_view op, const Tensor& w, std::initializer_list<Tensor> tensors) {
  check_dtype(op, w, DTypes::floating);
  for (const Tensor& t : tensors) {
    if (!t.defined()) continue;
    check_same_kind(op, w, t);
    LOOM_CHECK(t.shape() == w.shape(), "{}: a tensor of shape {} does not match the parameter's shape {}", op,
               t.shape(), w.shape());
    LOOM_CHECK(t.is_contiguous(), "{}: tensors must be contiguous (one of shape {} has strides {})", op, t.shape(),
               t.strides());
  }
  LOOM_CHECK(w.is_contiguous(), "{}: the parameter must be contiguous (strides {})", op, w.strides());
  LOOM_CHECK(!(grad_enabled() && w.requires_grad()),
             "{}: in-place update of a parameter that requires grad; run it under a NoGradGuard", op);
}

}  // namespace loom::detail
