// scaled_dot_product_attention(q, k, v, mask, p, train, gen), a composite:
//   weights = softmax(q k^T / sqrt(Dk), mask)        (mask: true = may not attend)
//   out     = dropout(weights, p, train) @ v
// Its gradient comes from matmul's, softmax's (fused, with its fused backward)
// and dropout's. A fused attention kernel would save only the [.., Tq, Tk]
// scores round trip; matmul already runs on BLAS and softmax in one fused pass,
// so the composite is as fast as a hand-fused CPU kernel at these sizes.
#include "rows.h"

namespace loom {

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
                                    double dropout_p, bool train, Generator& gen, Tensor* weights, Where where) {
  CallSite site(where);
  LOOM_CHECK(q.dim() >= 2 && k.dim() >= 2 && v.dim() >= 2,
             "scaled_dot_product_attention: q, k, v need at least 2 dims, got shapes {}, {}, {}", q.shape(), k.shape(),
             v.shape());
  LOOM_CHECK(q.shape().back() == k.shape().back(),
             "scaled_dot_product_attention: q has {} features per position but k has {} (shapes {} and {})",
             q.shape().back(), k.shape().back(), q.shape(), k.shape());
  LOOM_CHECK(k.shape()[k.dim() - 2] == v.shape()[v.dim() - 2],
             "scaled_dot_product_attention: k has {} positions but v has {} (shapes {} and {})", k.shape()[k.dim() - 2],
             v.shape()[v.dim() - 2], k.shape(), v.shape());
  // Scaling q (Tq x Dk) is cheaper than scaling the scores (Tq x Tk).
  double scale = 1.0 / std::sqrt(static_cast<double>(q.shape().back()));
  Tensor scores = matmul(mul(q, scalar_tensor(scale, {q.dtype(), q.device()})), transpose(k, -1, -2));
  Tensor attention = softmax(scores, -1, mask);
  if (weights) *weights = attention;
  return matmul(dropout(attention, dropout_p, train, gen), v);
}

namespace {
Tensor attention_fixed(const OpArgs& x, const Tensor& mask, double p) {
  Generator gen(99);
  return scaled_dot_product_attention(x[0], x[1], x[2], mask, p, p > 0, gen);
}
// The same math from plain ops (softmax as exp / sum; a bool mask as -inf added).
Tensor attention_composed(const OpArgs& x, const Tensor& additive) {
  double scale = 1.0 / std::sqrt(static_cast<double>(x[0].shape().back()));
  Tensor scores = mul(matmul(x[0], transpose(x[1], -1, -2)), scalar_tensor(scale, {DType::f64, x[0].device()}));
  if (additive.defined()) scores = add(scores, additive);
  Tensor e = exp(scores);
  return matmul(div(e, sum(e, {-1}, true)), x[2]);
}
}  // namespace

LOOM_OP(scaled_dot_product_attention){
    .name = "scaled_dot_product_attention",
    .formula = "y = dropout(W)·v,  W = softmax(S, mask),  S = q·kᵀ/√d_k",
    .derivative =
        "dv = Dᵀ·g, D = dropout(W);  dW = dropout_backward(g·vᵀ);  dS = W⊙(dW - Σ_row dW⊙W);  "
        "dq = dS·k/√d_k;  dk = dSᵀ·q/√d_k   (composite)",
    .shape_rule = "q [.., Tq, d_k], k [.., Tk, d_k], v [.., Tk, d_v] → [.., Tq, d_v]",
    .call = [](const OpArgs& x) { return attention_fixed(x, {}, 0.0); },
    .samples = {{{{{1, 2, 3, 3}}, {{1, 2, 4, 3}}, {{1, 2, 4, 2}}}},
                {{{{2, 4, 3}}, {{2, 4, 3}}, {{2, 4, 2}}},
                 [](const OpArgs& x) { return attention_fixed(x, causal_mask(4, x[0].device()), 0.0); },
                 "causal mask",
                 [](const OpArgs& x) { return attention_composed(x, detail::causal_additive(4, x[0].device())); }},
                {{{{2, 3, 3}}, {{2, 4, 3}}, {{2, 4, 2}}},
                 [](const OpArgs& x) { return attention_fixed(x, {}, 0.25); },
                 "dropout p=0.25"}},
    .composed = [](const OpArgs& x) { return attention_composed(x, {}); },
};

}  // namespace loom
