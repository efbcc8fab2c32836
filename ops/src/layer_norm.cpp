// layer_norm(x, w, b, eps) over the last dim (D entries), per row:
//   mu = mean(x),  var = mean((x - mu)^2),  r = 1/sqrt(var + eps),  xh = (x - mu) * r
//   y = xh * w + b                       (w, b of shape [D]; either may be absent)
// Backward (layer_norm_backward.cpp, one fused sweep over x and g), with a = g * w
// and P(u) = u - mean(u) - xh * mean(u * xh):
//   dx = layer_norm_backward(x, w, g) = r * P(a)
//   [dw; db] = layer_norm_param_grads(x, g) = [sum over rows of g * xh; sum over rows of g]
// The forward also saves each row's (mean, rstd) for the backward. CPU kernels: ops/cpu/layer_norm.cpp.
#include <cmath>

#include "layer_norm.h"

namespace loom {

Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps, Where where) {
  CallSite site(where);
  detail::check_layer_norm_args("layer_norm", x, weight, bias);
  LOOM_CHECK(eps >= 0 && std::isfinite(eps), "layer_norm: eps must be a finite number >= 0, got {}", eps);
  Tensor out = Tensor::empty(x.shape(), {x.dtype(), x.device()});
  // Each row's (mean, rstd), saved so the backward need not recompute them.
  const int64_t rows = x.numel() / std::max<int64_t>(x.shape().back(), 1);
  Tensor stats = Tensor::empty({rows, 2}, {detail::stats_dtype(x.dtype()), x.device()});
  detail::kernel_for<kernels::LayerNormKernel>("layer_norm", x)(out, stats, detail::dense(x), detail::dense(weight),
                                                                detail::dense(bias), eps);
  return record("layer_norm", {x, weight, bias}, out,
                [x, weight, eps, stats](BackwardContext& c, const Tensor& g) -> detail::Grads {
                  const bool want_params = c.needs(1) || c.needs(2);
                  detail::LayerNormGrads d =
                      detail::layer_norm_grads(x, weight, g, eps, c.needs(0), want_params, stats);
                  Tensor dw = c.needs(1) ? select(d.params, 0, 0) : Tensor();
                  Tensor db = c.needs(2) ? select(d.params, 0, 1) : Tensor();
                  return {d.dx, dw, db};
                });
}

namespace {
Tensor layer_norm_composed(const Tensor& x, const Tensor& w, const Tensor& b, double eps) {
  Tensor y = detail::normalize_with_ops(x, eps).xh;
  if (w.defined()) y = mul(y, w);
  if (b.defined()) y = add(y, b);
  return y;
}

}  // namespace

LOOM_OP(layer_norm){
    .name = "layer_norm",
    .formula = "y = x̂·w + b,  x̂ = (x - μ)·r,  r = 1/√(σ² + ε),  μ, σ² over the last dim",
    .derivative = "dx = r·P(g·w),  P(u) = u - mean(u) - x̂·mean(u·x̂);  dw = Σ_rows g·x̂;  db = Σ_rows g",
    .shape_rule = "x [.., D], w, b [D] → x's shape",
    .call = [](const OpArgs& x) { return layer_norm(x[0], x[1], x[2]); },
    .samples = {{.inputs = {{{4, 6}}, {{6}}, {{6}}}, .attributes = {{"normalized_shape", Shape{6}}}},
                {.inputs = {{{2, 3, 5}}, {{5}}, {{5}}}, .attributes = {{"normalized_shape", Shape{5}}}},
                {{{{3, 5}}, {{5}}},
                 [](const OpArgs& x) { return layer_norm(x[0], x[1]); },
                 "weight only",
                 [](const OpArgs& x) { return layer_norm_composed(x[0], x[1], {}, 1e-5); }},
                {{{{3, 5}}},
                 [](const OpArgs& x) { return layer_norm(x[0]); },
                 "no affine",
                 [](const OpArgs& x) { return layer_norm_composed(x[0], {}, {}, 1e-5); }},
                // D = 70: the float32 fast kernels' vector lanes, blocks and scalar tail
                {.inputs = {{{3, 70}}, {{70}}, {{70}}},
                 .label = "D=70 (vector lanes)",
                 .attributes = {{"normalized_shape", Shape{70}}}},
                {{{{3, 4}}, {{4}}, {{4}}},
                 [](const OpArgs& x) { return layer_norm(x[0], x[1], x[2], 0.1); },
                 "eps=0.1",
                 [](const OpArgs& x) { return layer_norm_composed(x[0], x[1], x[2], 0.1); }},
                {.inputs = {{{2, 3, 5}}, {{3, 5}}, {{3, 5}}},
                 .label = "normalized_shape=[3,5] eps=0.1",
                 .composed =
                     [](const OpArgs& x) {
                       return reshape(
                           layer_norm_composed(reshape(x[0], {2, 15}), reshape(x[1], {15}), reshape(x[2], {15}), 0.1),
                           {2, 3, 5});
                     },
                 .attributes = {{"normalized_shape", Shape{3, 5}}, {"eps", 0.1}}}},
    .composed = [](const OpArgs& x) { return layer_norm_composed(x[0], x[1], x[2], 1e-5); },
    .schema =
        "layer_norm(Tensor input, int[] normalized_shape, Tensor? weight=None, Tensor? bias=None, float eps=1e-05) "
        "-> Tensor",
    // As torch's: over the last len(normalized_shape) dims (loom's op: the last one).
    .invoke =
        [](const Arguments& a) {
          const Tensor& x = a.tensor("input");
          const Shape normalized = a.integers("normalized_shape");
          const auto n = static_cast<int64_t>(normalized.size());
          LOOM_CHECK(n >= 1 && n <= x.dim() && Shape(x.shape().end() - n, x.shape().end()) == normalized,
                     "layer_norm: normalized_shape {} must be the input's last dims, got an input of shape {}",
                     normalized, x.shape());
          const Tensor w = a.optional_tensor("weight"), b = a.optional_tensor("bias");
          if (n == 1) return layer_norm(x, w, b, a.number("eps"));
          Shape rows(x.shape().begin(), x.shape().end() - n);
          rows.push_back(-1);
          auto flat = [](const Tensor& t) { return t.defined() ? reshape(t, {-1}) : t; };
          return reshape(layer_norm(reshape(x, rows), flat(w), flat(b), a.number("eps")), x.shape());
        },
};

}  // namespace loom
