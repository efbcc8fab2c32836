#pragma once
// The Transformer's building blocks as Modules: Linear, Embedding, LayerNorm,
// Dropout, PositionwiseFeedForward, PositionalEncoding (MultiHeadAttention is in
// attention.h). Each forward is a few ops (their gradients come from the ops).
#include <cstdint>

#include "loom/nn/module.h"
#include "loom/random.h"

namespace loom::nn {

/// A parameter as a layer applies it to x: itself, or for bfloat16 activations (mixed
/// precision) its bfloat16 copy, made by to_dtype so that its gradient comes back
/// float32 to the parameter (the master weights, as PyTorch's autocast keeps them).
/// Undefined stays undefined.
Tensor as_activation_dtype(const Tensor& param, const Tensor& x);

/// y = x W^T + b, x [..., in] -> [..., out]. W [out, in] (PyTorch's layout),
/// Xavier-uniform; b zeros.
class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias = true, Generator& gen = default_generator(),
         TensorOptions options = {});
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return forward(x); }
  int64_t in_features() const { return in_; }
  int64_t out_features() const { return out_; }

  Tensor weight, bias;  // bias undefined when built without one

 private:
  int64_t in_, out_;
};

/// Rows of a [vocab, dim] table for int64 ids [...] -> [..., dim]. Weights
/// N(0, dim^-1/2): unit variance once a Transformer scales them by sqrt(dim).
/// The padding_idx row (if >= 0) starts at zero and gets no gradient.
class Embedding : public Module {
 public:
  Embedding(int64_t vocab_size, int64_t dim, int64_t padding_idx = -1, Generator& gen = default_generator(),
            TensorOptions options = {});
  Tensor forward(const Tensor& ids) const;
  Tensor operator()(const Tensor& ids) const { return forward(ids); }
  int64_t vocab_size() const { return weight.shape()[0]; }
  int64_t dim() const { return weight.shape()[1]; }

  Tensor weight;

 private:
  int64_t padding_idx_;
};

/// Normalizes the last dim to zero mean, unit variance, then scales and shifts
/// (weight ones, bias zeros).
class LayerNorm : public Module {
 public:
  explicit LayerNorm(int64_t dim, double eps = 1e-5, TensorOptions options = {});
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return forward(x); }
  double eps() const { return eps_; }

  Tensor weight, bias;

 private:
  double eps_;
};

/// Zeroes elements with probability p in training mode (scaling the rest by
/// 1/(1-p)); the identity in eval mode. Masks come from `gen` (Philox): a run
/// repeats exactly for a given seed, whatever the thread count.
class Dropout : public Module {
 public:
  explicit Dropout(double p, Generator& gen = default_generator());
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return forward(x); }
  /// forward(relu(x)) as one op (relu_dropout): the same draws and bits, one pass.
  Tensor after_relu(const Tensor& x) const;
  /// norm(x + forward(s)) as one op (dropout_add_layer_norm): the post-norm residual
  /// connection, with the same draws and bits.
  Tensor add_then_norm(const Tensor& x, const Tensor& s, const LayerNorm& norm) const;
  double p() const { return p_; }

 private:
  double p_;
  Generator* gen_;
};

/// FFN(x) = W2 dropout(relu(W1 x + b1)) + b2: d_model -> d_ff -> d_model.
class PositionwiseFeedForward : public Module {
 public:
  PositionwiseFeedForward(int64_t d_model, int64_t d_ff, double dropout = 0.1, Generator& gen = default_generator(),
                          TensorOptions options = {});
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return forward(x); }

  Linear w_1, w_2;
  Dropout dropout;
};

/// Adds the sinusoids of the paper, PE(pos, 2i) = sin(pos / 10000^(2i/d)),
/// PE(pos, 2i+1) = cos(pos / 10000^(2i/d)), to x [B, T, d], then dropout.
/// The table (computed in float64, stored in x's dtype) is not a parameter.
/// `learned`: a trained table instead ("weight", N(0, d^-1/2) like Embedding),
/// the variant of the paper's Table 3, row (E).
class PositionalEncoding : public Module {
 public:
  PositionalEncoding(int64_t d_model, double dropout = 0.1, int64_t max_len = 5000,
                     Generator& gen = default_generator(), TensorOptions options = {}, bool learned = false);
  /// x [batch, time, d_model] holds positions first .. first + time - 1 (first > 0: a
  /// decoder fed one token at a time).
  Tensor forward(const Tensor& x, int64_t first = 0) const;
  Tensor operator()(const Tensor& x, int64_t first = 0) const { return forward(x, first); }
  const Tensor& table() const { return table_; }  // [max_len, d_model]

  Dropout dropout;

 private:
  Tensor table_;
};

}  // namespace loom::nn
