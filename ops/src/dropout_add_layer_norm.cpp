// dropout_add_layer_norm(x, s, w, b, p, train, gen, eps): the post-norm residual
// connection norm(x + dropout(sublayer(x))) as one op:
//   h = x + keep * s / (1 - p)   (keep: dropout's draws)
//   y = layer_norm(h, w, b, eps)
//   dh = layer_norm_backward(h, w, g);  dx = dh;  ds = dropout_backward(dh, mask, p)
//   [dw; db] = layer_norm_param_grads(h, g)
// Apart, dropout writes its output for add to read back, and add writes h for layer
// norm to read back: on a GPU three launches, on a CPU a pass over the activations
// more. One kernel writes h (kept for the backward, as layer_norm keeps its input)
// and normalizes each row while it is in cache. It draws what dropout draws (one
// generator offset) and computes the same products, so it gives the three ops' bits.
// !train or p == 0: layer_norm(x + s). CPU kernels: ops/cpu/dropout_add_layer_norm.cpp.
#include <algorithm>
#include <cmath>

#include "dropout_support.h"
#include "layer_norm.h"

namespace loom {

Tensor dropout_add_layer_norm(const Tensor& x, const Tensor& s, const Tensor& weight, const Tensor& bias, double p,
                              bool train, Generator& gen, double eps, Where where) {
  CallSite site(where);
  constexpr const char* op = "dropout_add_layer_norm";
  detail::check_dropout_input(op, s, p);
  detail::check_same_kind(op, x, s);
  LOOM_CHECK(x.shape() == s.shape(), "{}: x has shape {} but s has shape {}", op, x.shape(), s.shape());
  detail::check_layer_norm_args(op, x, weight, bias);
  LOOM_CHECK(eps >= 0 && std::isfinite(eps), "{}: eps must be a finite number >= 0, got {}", op, eps);
  if (!train || p == 0.0) return layer_norm(add(x, s), weight, bias, eps);
  const kernels::DropoutDraw draw{p, gen.seed(), gen.next_offset()};
  const TensorOptions like_x{x.dtype(), x.device()};
  Tensor out = Tensor::empty(x.shape(), like_x), h = Tensor::empty(x.shape(), like_x);
  // Each row's (mean, rstd), as layer_norm saves them.
  const int64_t rows = x.numel() / std::max<int64_t>(x.shape().back(), 1);
  Tensor stats = Tensor::empty({rows, 2}, {detail::stats_dtype(x.dtype()), x.device()});
  Tensor mask = Tensor::empty({kernels::dropout_mask_words(x.numel())}, {DType::i32, x.device()});
  Tensor xd = detail::dense(x), sd = detail::dense(s);
  detail::kernel_for<kernels::DropoutAddLayerNormKernel>(op, x)(out, h, stats, mask, xd, sd, detail::dense(weight),
                                                                detail::dense(bias), draw, eps);
  return record(op, {x, s, weight, bias}, out,
                [xd, sd, h, stats, mask, weight, p, eps](BackwardContext& c, const Tensor& g) -> detail::Grads {
                  // Recording a second derivative: h again with ops, so that it reaches x and s.
                  const Tensor sum = grad_enabled() ? add(xd, dropout_backward(sd, mask, p)) : h;
                  const bool want_dh = c.needs(0) || c.needs(1), want_params = c.needs(2) || c.needs(3);
                  detail::LayerNormGrads d = detail::layer_norm_grads(sum, weight, g, eps, want_dh, want_params, stats);
                  return {c.needs(0) ? d.dx : Tensor(), c.needs(1) ? dropout_backward(d.dx, mask, p) : Tensor(),
                          c.needs(2) ? select(d.params, 0, 0) : Tensor(),
                          c.needs(3) ? select(d.params, 0, 1) : Tensor()};
                });
}

namespace {
// A fresh generator per call, as detail::dropout_fixed: the same mask at every evaluation.
Tensor dropout_add_layer_norm_fixed(const OpArgs& x, double eps = 1e-5) {
  Generator gen(1234);
  return dropout_add_layer_norm(x[0], x[1], x.size() > 2 ? x[2] : Tensor(), x.size() > 3 ? x[3] : Tensor(), 0.3, true,
                                gen, eps);
}
Tensor composed(const OpArgs& x, double eps = 1e-5) {
  return layer_norm(add(x[0], detail::dropout_fixed(x[1], 0.3)), x.size() > 2 ? x[2] : Tensor(),
                    x.size() > 3 ? x[3] : Tensor(), eps);
}
}  // namespace

LOOM_OP(dropout_add_layer_norm){
    .name = "dropout_add_layer_norm",
    .formula = "y = layer_norm(x + keep·s/(1-p), w, b),  keep = [u ≥ p] (dropout's draws)",
    .derivative =
        "dh = layer_norm_backward(h, w, g);  dx = dh;  ds = dropout_backward(dh, mask, p);  "
        "[dw; db] = layer_norm_param_grads(h, g)",
    .shape_rule = "x, s [.., D], w, b [D] → x's shape",
    .call = [](const OpArgs& x) { return dropout_add_layer_norm_fixed(x); },
    .samples = {{{{{4, 6}}, {{4, 6}}, {{6}}, {{6}}}, {}, "[4,6] p=0.3"},
                // D = 70: layer norm's vector lanes and tail; mask words across rows
                {{{{3, 70}}, {{3, 70}}, {{70}}, {{70}}}, {}, "[3,70] p=0.3"},
                {{{{2, 3, 45}}, {{2, 3, 45}}}, {}, "[2,3,45] no affine"},
                {{{{3, 5}}, {{3, 5}}, {{5}}, {{5}}},
                 [](const OpArgs& x) { return dropout_add_layer_norm_fixed(x, 0.1); },
                 "eps=0.1",
                 [](const OpArgs& x) { return composed(x, 0.1); }}},
    .composed = [](const OpArgs& x) { return composed(x); },
};

}  // namespace loom
