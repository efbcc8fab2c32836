#include "loom/nn/attention.h"

#include "loom/ops.h"

namespace loom::nn {

MultiHeadAttention::MultiHeadAttention(int64_t d_model, int64_t heads, double dropout, Generator& gen,
                                       TensorOptions options)
    : w_q(d_model, d_model, true, gen, options),
      w_k(d_model, d_model, true, gen, options),
      w_v(d_model, d_model, true, gen, options),
      w_o(d_model, d_model, true, gen, options),
      d_model_(d_model),
      heads_(heads),
      dropout_p_(dropout),
      gen_(&gen) {
  LOOM_CHECK(heads > 0 && d_model % heads == 0,
             "MultiHeadAttention: d_model {} must be a positive multiple of the number of heads {}", d_model, heads);
  LOOM_CHECK(dropout >= 0.0 && dropout < 1.0, "MultiHeadAttention: dropout must be in [0, 1), got {}", dropout);
  register_module("w_q", w_q);
  register_module("w_k", w_k);
  register_module("w_v", w_v);
  register_module("w_o", w_o);
}

Tensor MultiHeadAttention::forward(const Tensor& query, const Tensor& key, const Tensor& value, const Tensor& mask) {
  auto check = [&](const char* what, const Tensor& t) {
    LOOM_CHECK(t.dim() == 3 && t.shape()[2] == d_model_,
               "MultiHeadAttention: {} must be [batch, time, {}], got shape {}", what, d_model_, t.shape());
  };
  check("query", query);
  check("key", key);
  check("value", value);
  LOOM_CHECK(key.shape() == value.shape(), "MultiHeadAttention: key {} and value {} must have the same shape",
             key.shape(), value.shape());
  LOOM_CHECK(query.shape()[0] == key.shape()[0], "MultiHeadAttention: query {} and key {} differ in batch size",
             query.shape(), key.shape());
  const int64_t batch = query.shape()[0], d_head = d_model_ / heads_;
  // [B, T, d_model] -> [B, heads, T, d_head]
  auto split_heads = [&](const Tensor& x) {
    return x.reshape({batch, x.shape()[1], heads_, d_head}).permute({0, 2, 1, 3});
  };
  Tensor weights;
  Tensor context = scaled_dot_product_attention(split_heads(w_q(query)), split_heads(w_k(key)),
                                                split_heads(w_v(value)), mask, dropout_p_, is_training(), *gen_,
                                                keep_weights_ ? &weights : nullptr);
  if (keep_weights_) last_weights_ = weights.detach();
  // [B, heads, Tq, d_head] -> [B, Tq, d_model]
  return w_o(context.permute({0, 2, 1, 3}).reshape({batch, query.shape()[1], d_model_}));
}

}  // namespace loom::nn
