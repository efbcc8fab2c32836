// The backward of layer_norm (layer_norm.cpp), per row of D entries, with
//   xh = (x - mean(x)) * r,  r = 1/sqrt(var(x) + eps),  a = g * w,
//   P(u) = u - mean(u) - xh * mean(u * xh)   (the projection in xh's Jacobian r * P):
//   dx = layer_norm_backward(x, w, g) = r * P(a)
//   [dw; db] = layer_norm_param_grads(x, g) = [sum over rows of g * xh; sum over rows of g]   ([2, D])
// Both are primitives computed by one fused sweep over (x, g) when both are needed
// (detail::layer_norm_grads), each recorded as its own node. Their derivatives,
// written with ops so they are differentiable again:
// layer_norm_backward, for an upstream v (dr = -r^2 * mean(xh * dx)):
//   d/dg = w * r * P(v)            d/dw = sum over rows of g * r * P(v)
//   d/dx = -r^2 * (mean(v * P(a)) * xh + mean(a * xh) * P(v) + mean(v * xh) * P(a))
// layer_norm_param_grads, for an upstream V = [vw; vb] (P is symmetric):
//   d/dx = r * P(g * vw) = layer_norm_backward(x, vw, g)
//   d/dg = xh * vw + vb  = layer_norm(x, vw, vb)
// CPU kernels: ops/cpu/layer_norm.cpp.
#include "layer_norm.h"

namespace loom {

namespace {

void check_grad(std::string_view op, const Tensor& x, const Tensor& grad) {
  detail::check_same_kind(op, x, grad);
  LOOM_CHECK(x.shape() == grad.shape(), "{}: x has shape {} but grad has shape {}", op, x.shape(), grad.shape());
}

// The node of dx = layer_norm_backward(x, weight, grad): its derivatives (top of the file).
BackwardFn dx_backward(const Tensor& x, const Tensor& weight, const Tensor& grad, double eps) {
  return [x, weight, grad, eps](BackwardContext& c, const Tensor& v) -> detail::Grads {
    Tensor dx, dw, dg;
    // r * P(v): the same fused kernel without weight.
    Tensor rpv = (c.needs(1) || c.needs(2)) ? layer_norm_backward(x, {}, v, eps) : Tensor();
    if (c.needs(0)) {
      detail::Normalized n = detail::normalize_with_ops(x, eps);
      Tensor a = weight.defined() ? mul(grad, weight) : grad;
      Tensor pa = detail::project(a, n.xh), pv = detail::project(v, n.xh);
      Tensor terms = add(add(mul(mean(mul(v, pa), {-1}, true), n.xh), mul(mean(mul(a, n.xh), {-1}, true), pv)),
                         mul(mean(mul(v, n.xh), {-1}, true), pa));
      dx = neg(mul(mul(n.r, n.r), terms));
    }
    if (c.needs(1)) dw = sum_to(mul(grad, rpv), c.input_shape(1));
    if (c.needs(2)) dg = weight.defined() ? mul(rpv, weight) : rpv;
    return {dx, dw, dg};
  };
}

// The node of [dw; db] = layer_norm_param_grads(x, grad).
BackwardFn params_backward(const Tensor& x, const Tensor& grad, double eps) {
  return [x, grad, eps](BackwardContext& c, const Tensor& v) -> detail::Grads {
    Tensor vw = select(v, 0, 0), vb = select(v, 0, 1);
    Tensor dx = c.needs(0) ? layer_norm_backward(x, vw, grad, eps) : Tensor();
    Tensor dg = c.needs(1) ? layer_norm(x, vw, vb, eps) : Tensor();
    return {dx, dg};
  };
}

}  // namespace

namespace detail {
LayerNormGrads layer_norm_grads(const Tensor& x, const Tensor& weight, const Tensor& grad, double eps, bool want_dx,
                                bool want_params, const Tensor& stats) {
  LayerNormGrads out;
  if (!want_dx && !want_params) return out;
  if (want_dx) out.dx = Tensor::empty(x.shape(), {x.dtype(), x.device()});
  if (want_params) out.params = Tensor::empty({2, x.shape().back()}, {x.dtype(), x.device()});
  kernel_for<kernels::LayerNormBackwardKernel>(want_dx ? "layer_norm_backward" : "layer_norm_param_grads", x)(
      out.dx, out.params, dense(x), dense(weight), dense(grad), stats, eps);
  if (want_dx) out.dx = record("layer_norm_backward", {x, weight, grad}, out.dx, dx_backward(x, weight, grad, eps));
  if (want_params) out.params = record("layer_norm_param_grads", {x, grad}, out.params, params_backward(x, grad, eps));
  return out;
}
}  // namespace detail

Tensor layer_norm_backward(const Tensor& x, const Tensor& weight, const Tensor& grad, double eps, Where where) {
  CallSite site(where);
  detail::check_layer_norm_args("layer_norm_backward", x, weight, {});
  check_grad("layer_norm_backward", x, grad);
  return detail::layer_norm_grads(x, weight, grad, eps, true, false).dx;
}

Tensor layer_norm_param_grads(const Tensor& x, const Tensor& grad, double eps, Where where) {
  CallSite site(where);
  detail::check_layer_norm_args("layer_norm_param_grads", x, {}, {});
  check_grad("layer_norm_param_grads", x, grad);
  return detail::layer_norm_grads(x, {}, grad, eps, false, true).params;
}

namespace {
Tensor layer_norm_backward_composed(const Tensor& x, const Tensor& w, const Tensor& g, double eps) {
  detail::Normalized n = detail::normalize_with_ops(x, eps);
  return mul(n.r, detail::project(w.defined() ? mul(g, w) : g, n.xh));
}
Tensor layer_norm_param_grads_composed(const Tensor& x, const Tensor& g, double eps) {
  Tensor xh = detail::normalize_with_ops(x, eps).xh;
  Shape d = {x.shape().back()};
  return stack({sum_to(mul(g, xh), d), sum_to(g, d)});
}
}  // namespace

LOOM_OP(layer_norm_backward){
    .name = "layer_norm_backward",
    .formula = "dx = r·P(a),  a = g·w,  P(u) = u - mean(u) - x̂·mean(u·x̂),  r = 1/√(σ² + ε)",
    .derivative = "d/dg = w·r·P(v);  d/dx = -r²·(mean(v·P(a))·x̂ + mean(a·x̂)·P(v) + mean(v·x̂)·P(a))",
    .shape_rule = "x, g [.., D], w [D] → x's shape",
    .call = [](const OpArgs& x) { return layer_norm_backward(x[0], x[1], x[2]); },
    .samples = {{{{{4, 6}}, {{6}}, {{4, 6}}}},
                {{{{2, 3, 5}}, {{5}}, {{2, 3, 5}}}},
                {{{{3, 70}}, {{70}}, {{3, 70}}}, {}, "D=70 (vector lanes)"},
                {{{{3, 5}}, {{3, 5}}},
                 [](const OpArgs& x) { return layer_norm_backward(x[0], {}, x[1]); },
                 "no weight",
                 [](const OpArgs& x) { return layer_norm_backward_composed(x[0], {}, x[1], 1e-5); }}},
    .composed = [](const OpArgs& x) { return layer_norm_backward_composed(x[0], x[1], x[2], 1e-5); },
};

LOOM_OP(layer_norm_param_grads){
    .name = "layer_norm_param_grads",
    .formula = "[dw; db] = [Σ_rows g·x̂; Σ_rows g]",
    .derivative = "d/dx = layer_norm_backward(x, v_w, g);  d/dg = x̂·v_w + v_b",
    .shape_rule = "x, g [.., D] → [2, D]",
    .call = [](const OpArgs& x) { return layer_norm_param_grads(x[0], x[1]); },
    .samples = {{{{{4, 6}}, {{4, 6}}}},
                {{{{2, 3, 5}}, {{2, 3, 5}}}},
                // 40 rows of 70: two row blocks of the partial sums, the vector lanes and the tail
                {{{{40, 70}}, {{40, 70}}}, {}, "[40,70] (row blocks, vector lanes)"},
                {{{{3, 4}}, {{3, 4}}},
                 [](const OpArgs& x) { return layer_norm_param_grads(x[0], x[1], 0.1); },
                 "eps=0.1",
                 [](const OpArgs& x) { return layer_norm_param_grads_composed(x[0], x[1], 0.1); }}},
    .composed = [](const OpArgs& x) { return layer_norm_param_grads_composed(x[0], x[1], 1e-5); },
};

}  // namespace loom
