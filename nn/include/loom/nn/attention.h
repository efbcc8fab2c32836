#pragma once
// Multi-head attention (Vaswani et al. 2017, section 3.2.2):
//   MultiHead(Q, K, V) = Concat(head_1..head_h) W_o,  head_i = Attention(Q W_q^i, K W_k^i, V W_v^i)
// with the h heads' projections as one d_model x d_model Linear each.
#include "loom/nn/layers.h"

namespace loom::nn {

class MultiHeadAttention : public Module {
 public:
  MultiHeadAttention(int64_t d_model, int64_t heads, double dropout = 0.1, Generator& gen = default_generator(),
                     TensorOptions options = {});
  // query [B, Tq, d_model], key and value [B, Tk, d_model] -> [B, Tq, d_model].
  // mask: bool, true = masked, broadcastable to [B, heads, Tq, Tk] (e.g. a
  // causal [Tq, Tk] mask, or a padding mask [B, 1, 1, Tk]).
  Tensor forward(const Tensor& query, const Tensor& key, const Tensor& value, const Tensor& mask = {});
  Tensor operator()(const Tensor& query, const Tensor& key, const Tensor& value, const Tensor& mask = {}) {
    return forward(query, key, value, mask);
  }

  // forward in two halves, for a decoder that caches keys and values between steps:
  // key and value [B, Tk, d_model] projected and split into heads, [B, heads, Tk, d_head]
  // each; then query [B, Tq, d_model] attending over them (mask as in forward).
  struct KeyValue {
    Tensor key, value;
  };
  KeyValue project_key_value(const Tensor& key, const Tensor& value);
  Tensor attend(const Tensor& query, const KeyValue& projected, const Tensor& mask = {});

  // For study: when on, each forward keeps its attention weights [B, heads, Tq, Tk]
  // (after softmax, before dropout; detached) in last_weights().
  void keep_weights(bool on) { keep_weights_ = on; }
  const Tensor& last_weights() const { return last_weights_; }
  int64_t heads() const { return heads_; }

  Linear w_q, w_k, w_v, w_o;

 private:
  void check_input(const char* what, const Tensor& t) const;
  Tensor split_heads(const Tensor& x) const;

  int64_t d_model_, heads_;
  double dropout_p_;
  Generator* gen_;
  bool keep_weights_ = false;
  Tensor last_weights_;
};

}  // namespace loom::nn
