// scaled_dot_product_attention(q, k, v, mask, p, train, gen):
//   weights = softmax(q k^T / sqrt(Dk), mask)        (mask: true = may not attend)
//   out     = dropout(weights, p, train) @ v
// computed by flash_attention (ops/src/flash_attention.cpp: no [.., Tq, Tk] tensor kept)
// where those tensors would be large, else by the composite of matmul, softmax and
// dropout (also when the weights are asked for, a float mask needs its gradient, or
// products are in bf16 precision). The registry checks the op against the composite's
// math below.
#include "attention.h"
#include "loom/matmul_precision.h"
#include "rows.h"

namespace loom {

namespace detail {
Tensor attention_composite(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask, double dropout_p,
                           bool train, Generator& gen, Tensor* weights) {
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
}  // namespace detail

namespace {
// How many attention weights q and k make ([.., Tq, Tk], the batch dims broadcast).
int64_t weight_count(const Tensor& q, const Tensor& k) {
  if (q.dim() < 2 || k.dim() < 2) return 0;  // the composite names the error
  const Shape batch = kernels::broadcast_shapes(Shape(q.shape().begin(), q.shape().end() - 2),
                                                Shape(k.shape().begin(), k.shape().end() - 2), "attention");
  int64_t count = q.shape()[q.dim() - 2] * k.shape()[k.dim() - 2];
  for (int64_t b : batch) count *= b;
  return count;
}
}  // namespace

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
                                    double dropout_p, bool train, Generator& gen, Tensor* weights, Where where) {
  CallSite site(where);
  // The fused op keeps no [.., Tq, Tk] tensor, but its kernels are not yet as fast as
  // BLAS products (CPU, T = 24: 7.6 ms against the composite's 1.3 for a forward and
  // backward): it runs where those tensors would be large. The composite also gives the
  // weights (for study), a float mask's gradient, and bf16 matmul precision's products
  // (--precision bf16 keeps its bits: the fused kernels compute in float32). The
  // choice depends on the shapes alone: the same bits at any thread count.
  const bool large = weight_count(q, k) >= kFusedAttentionWeights;
  if (!large || weights || (mask.defined() && mask.requires_grad()) || matmul_precision() == MatmulPrecision::bf16)
    return detail::attention_composite(q, k, v, mask, dropout_p, train, gen, weights);
  return flash_attention(q, k, v, mask, dropout_p, train, gen);
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
// An additive [queries, keys] mask: -inf on the keys after each query's position.
Tensor first_keys_visible(int64_t queries, int64_t keys, Device device) {
  std::vector<double> additive;
  for (int64_t i = 0; i < queries; ++i)
    for (int64_t j = 0; j < keys; ++j) additive.push_back(j > i ? -std::numeric_limits<double>::infinity() : 0.0);
  return from_vector<double>(additive, {queries, keys}, {DType::f64, device});
}
// torch.nn.functional.scaled_dot_product_attention's call: a bool attn_mask is True
// where a query MAY attend (loom's op: True where it may not); a float mask is added to
// the scores; is_causal hides the keys after each query's position (top-left aligned).
Tensor attention_as_torch(const Arguments& a) {
  const Tensor &q = a.tensor("query"), &k = a.tensor("key"), &v = a.tensor("value");
  Tensor mask = a.optional_tensor("attn_mask");
  if (mask.defined() && mask.dtype() == DType::b8) mask = eq(mask, scalar_tensor(0, {DType::b8, mask.device()}));
  if (a.boolean("is_causal")) {
    LOOM_CHECK(!mask.defined(), "scaled_dot_product_attention: give attn_mask or is_causal, not both");
    LOOM_CHECK(q.dim() >= 2 && k.dim() >= 2, "scaled_dot_product_attention: q and k need at least 2 dims");
    const TensorOptions positions{DType::i64, q.device()};
    mask = gt(unsqueeze(arange(k.shape()[k.dim() - 2], positions), 0),
              unsqueeze(arange(q.shape()[q.dim() - 2], positions), 1));
  }
  Tensor scaled_q = q;
  if (auto scale = a.optional_number("scale"))  // loom's op scales by 1/sqrt(d_k): the rest goes on q
    scaled_q =
        mul(q, scalar_tensor(*scale * std::sqrt(static_cast<double>(q.shape().back())), {q.dtype(), q.device()}));
  const double p = a.number("dropout_p");
  return scaled_dot_product_attention(scaled_q, k, v, mask, p, p > 0);
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
                 "dropout p=0.25"},
                {.inputs = {{{2, 3, 3}}, {{2, 4, 3}}, {{2, 4, 2}}},
                 .label = "is_causal=True, 3 queries on 4 keys",
                 .composed =
                     [](const OpArgs& x) { return attention_composed(x, first_keys_visible(3, 4, x[0].device())); },
                 .attributes = {{"is_causal", true}}},
                {.inputs = {{{2, 3, 3}}, {{2, 3, 3}}, {{2, 3, 2}}},
                 .label = "scale=0.3",
                 .composed =
                     [](const OpArgs& x) {
                       return attention_composed(
                           {mul(x[0], scalar_tensor(0.3 * std::sqrt(3.0), {DType::f64, x[0].device()})), x[1], x[2]},
                           {});
                     },
                 .attributes = {{"scale", 0.3}}}},
    .composed = [](const OpArgs& x) { return attention_composed(x, {}); },
    .schema =
        "scaled_dot_product_attention(Tensor query, Tensor key, Tensor value, Tensor? attn_mask=None, "
        "float dropout_p=0, bool is_causal=False, *, float? scale=None) -> Tensor",
    .invoke = [](const Arguments& a) { return attention_as_torch(a); },
};

}  // namespace loom
