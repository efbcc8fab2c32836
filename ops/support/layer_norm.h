#pragma once
// Shared by layer_norm.cpp (the forward) and layer_norm_backward.cpp (the fused
// backward ops): argument checks, and xh, r and the projection P written with ops
// (for the compositions and the differentiable double backward). Formulas: see
// the top of those files; CPU kernels: ops/cpu/layer_norm.cpp.
#include "rows.h"

namespace loom::detail {

// The dtype of the saved (mean, rstd) per row: x's, or float32 for bfloat16 (its kernels' arithmetic).
inline DType stats_dtype(DType x) { return x == DType::bf16 ? DType::f32 : x; }

inline void check_layer_norm_args(std::string_view op, const Tensor& x, const Tensor& w, const Tensor& b) {
  LOOM_CHECK(is_floating(x.dtype()), "{}: expected float32, float64 or bfloat16, got {}", op, dtype_name(x.dtype()));
  LOOM_CHECK(x.dim() >= 1, "{}: expected at least 1 dim, got a 0-d tensor", op);
  for (const Tensor* p : {&w, &b}) {
    if (!p->defined()) continue;
    check_same_kind(op, x, *p);
    LOOM_CHECK(p->dim() == 1 && p->shape()[0] == x.shape().back(),
               "{}: weight and bias must have shape [{}] (the input's last dim), got {}", op, x.shape().back(),
               p->shape());
  }
}

// xh and r of each row, written with ops (for the differentiable double backward and the composition).
struct Normalized {
  Tensor xh, r;
};
inline Normalized normalize_with_ops(const Tensor& x, double eps) {
  Tensor xc = sub(x, mean(x, {-1}, true));
  Tensor var = mean(mul(xc, xc), {-1}, true);
  Tensor r = pow(add(var, scalar_tensor(eps, {x.dtype(), x.device()})), -0.5);
  return {mul(xc, r), r};
}

// P(u) = u - mean(u) - xh * mean(u * xh): the projection in layer norm's Jacobian.
inline Tensor project(const Tensor& u, const Tensor& xh) {
  return sub(sub(u, mean(u, {-1}, true)), mul(xh, mean(mul(u, xh), {-1}, true)));
}

// The backward of layer_norm in one sweep over (x, g): dx (if want_dx; the op
// layer_norm_backward) and [dweight; dbias] as one [2, D] tensor (if want_params;
// the op layer_norm_param_grads), each recorded as its own differentiable node.
// `stats` (optional): the forward's [rows, 2] (mean, rstd) of x.
struct LayerNormGrads {
  Tensor dx, params;
};
LayerNormGrads layer_norm_grads(const Tensor& x, const Tensor& weight, const Tensor& grad, double eps, bool want_dx,
                                bool want_params, const Tensor& stats = {});

}  // namespace loom::detail
