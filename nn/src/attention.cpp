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
  return attend(query, project_key_value(key, value), mask);
}

void MultiHeadAttention::check_input(const char* what, const Tensor& t) const {
  LOOM_CHECK(t.dim() == 3 && t.shape()[2] == d_model_, "MultiHeadAttention: {} must be [batch, time, {}], got shape {}",
             what, d_model_, t.shape());
}

// [B, T, d_model] -> [B, heads, T, d_head]
Tensor MultiHeadAttention::split_heads(const Tensor& x) const {
  return x.reshape({x.shape()[0], x.shape()[1], heads_, d_model_ / heads_}).permute({0, 2, 1, 3});
}

MultiHeadAttention::KeyValue MultiHeadAttention::project_key_value(const Tensor& key, const Tensor& value) {
  check_input("key", key);
  check_input("value", value);
  LOOM_CHECK(key.shape() == value.shape(), "MultiHeadAttention: key {} and value {} must have the same shape",
             key.shape(), value.shape());
  return {split_heads(w_k(key)), split_heads(w_v(value))};
}

Tensor MultiHeadAttention::attend(const Tensor& query, const KeyValue& projected, const Tensor& mask) {
  check_input("query", query);
  LOOM_CHECK(query.shape()[0] == projected.key.shape()[0],
             "MultiHeadAttention: query {} and key {} differ in batch size", query.shape(), projected.key.shape());
  const int64_t batch = query.shape()[0];
  Tensor weights;
  Tensor context = scaled_dot_product_attention(split_heads(w_q(query)), projected.key, projected.value, mask,
                                                dropout_p_, is_training(), *gen_, keep_weights_ ? &weights : nullptr);
  if (keep_weights_) last_weights_ = weights.detach();
  // [B, heads, Tq, d_head] -> [B, Tq, d_model]
  return w_o(context.permute({0, 2, 1, 3}).reshape({batch, query.shape()[1], d_model_}));
}

}  // namespace loom::nn
