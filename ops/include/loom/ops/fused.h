#pragma once
// Fused primitive ops for the Transformer: softmax / log_softmax with masks,
// layer norm, dropout, attention and label-smoothed cross-entropy. Each is one
// primitive with a fast kernel and a plain reference kernel; each backward is a
// fused backward op (also a registered, differentiable primitive), so double
// backward works. Definitions: one file per op under ops/src/.
#include <cstdint>
#include <source_location>

#include "loom/random.h"
#include "loom/tensor.h"

namespace loom {

// ---- softmax family (over `dim`, any dim) ----
/// `mask` (optional) is broadcastable to x and either
///   float: added to x before normalizing (0 keeps, -inf or a large negative masks), or
///   bool:  true = masked out (treated as logit -inf).
/// A fully masked row gives softmax 0 everywhere (not NaN) and log_softmax -inf
/// everywhere; in both cases the gradient flowing back through the row is 0.
/// Rows are max-shifted, so logits of magnitude 1e4 stay finite and exact.
Tensor softmax(const Tensor& x, int64_t dim = -1, const Tensor& mask = {}, Where where = Where::current());
Tensor log_softmax(const Tensor& x, int64_t dim = -1, const Tensor& mask = {}, Where where = Where::current());
/// The fused backward ops (over the last dim): y is the forward output, grad its gradient.
///   softmax_backward(y, g)     = y * (g - sum(g * y))
///   log_softmax_backward(y, g) = g - exp(y) * sum(g)   (0 where y = -inf: masked entries)
Tensor softmax_backward(const Tensor& y, const Tensor& grad, Where where = Where::current());
Tensor log_softmax_backward(const Tensor& y, const Tensor& grad, Where where = Where::current());

// ---- layer norm over the last dim ----
/// y = (x - mean) / sqrt(var + eps) * weight + bias, var biased; weight and bias
/// have shape [D] and either may be undefined (Tensor()).
Tensor layer_norm(const Tensor& x, const Tensor& weight = {}, const Tensor& bias = {}, double eps = 1e-5,
                  Where where = Where::current());
/// dx of layer_norm for output gradient `grad` (weight may be undefined):
///   dx = rstd * (a - mean(a) - xhat * mean(a * xhat)),  a = grad * weight.
Tensor layer_norm_backward(const Tensor& x, const Tensor& weight, const Tensor& grad, double eps = 1e-5,
                           Where where = Where::current());
/// dweight and dbias of layer_norm as one [2, D] tensor:
///   [sum over rows of grad * xhat; sum over rows of grad]   (xhat = layer_norm(x) without affine).
/// layer_norm's backward computes it in the same sweep over (x, grad) as dx.
Tensor layer_norm_param_grads(const Tensor& x, const Tensor& grad, double eps = 1e-5, Where where = Where::current());

/// The linear op's parameter gradients as one flat tensor [N·K + N]: dW = gᵀ x
/// ([N, K] row-major) followed by db = Σ_rows g ([N]), for g [M, N] and x [M, K].
/// A device with a kernel computes both in one product (cuBLASLt's bias-gradient
/// epilogue); elsewhere it is that composition.
Tensor linear_param_grads(const Tensor& grad, const Tensor& x, Where where = Where::current());

// ---- dropout ----
/// Zeroes each element with probability p and scales the kept ones by 1/(1-p);
/// p == 0 or !train returns x itself. The mask is Philox(seed, offset) of the
/// element's logical index (gen advances by one offset per call): the same for
/// any thread count.
Tensor dropout(const Tensor& x, double p, bool train = true, Generator& gen = default_generator(),
               Where where = Where::current());
/// grad * keep * 1/(1-p), keep read from `mask`: the forward's keep decisions as
/// a bitmask (bit i % 32 of int32 word i / 32, ceil(numel / 32) words, saved by
/// dropout for its backward). dropout's backward, and its own backward (the map
/// is linear and self-adjoint).
Tensor dropout_backward(const Tensor& grad, const Tensor& mask, double p, Where where = Where::current());
/// dropout(relu(x), p, train, gen) in one pass, with dropout's draws and bits (the
/// feed-forward's activation); !train or p == 0 gives relu(x). Its backward,
/// keep * [x > 0] * grad / (1 - p), reads x, grad and the forward's bitmask once.
Tensor relu_dropout(const Tensor& x, double p, bool train = true, Generator& gen = default_generator(),
                    Where where = Where::current());
Tensor relu_dropout_backward(const Tensor& x, const Tensor& grad, const Tensor& mask, double p,
                             Where where = Where::current());

// ---- the post-norm residual connection ----
/// layer_norm(x + dropout(s, p, train, gen), weight, bias, eps) as one op: the sum and
/// its normalization in one kernel, with dropout's draws and the three ops' bits. x and
/// s have one shape; weight and bias as layer_norm's. The backward is layer_norm's, its
/// dx going to x as it is and to s through dropout_backward.
Tensor dropout_add_layer_norm(const Tensor& x, const Tensor& s, const Tensor& weight, const Tensor& bias, double p,
                              bool train = true, Generator& gen = default_generator(), double eps = 1e-5,
                              Where where = Where::current());

// ---- attention ----
/// softmax(q k^T / sqrt(Dk), mask) (dropout in training) @ v, a composite of
/// matmul, softmax (with mask) and dropout. q [B,H,Tq,Dk], k [B,H,Tk,Dk],
/// v [B,H,Tk,Dv] (any batch dims) -> [B,H,Tq,Dv]. mask: bool, true = masked,
/// broadcastable to [B,H,Tq,Tk]. `weights`, when given, receives the attention
/// weights (after softmax, before dropout) for study.
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask = {},
                                    double dropout_p = 0.0, bool train = false, Generator& gen = default_generator(),
                                    Tensor* weights = nullptr, Where where = Where::current());

/// The same value computed FlashAttention-2's way (ops/src/flash_attention.cpp): key
/// blocks with an online softmax, each row's log-sum-exp kept for the backward, which
/// recomputes the weights; nothing of size [.., Tq, Tk] is kept. mask: bool (true =
/// masked) or additive, a constant; dropout draws what the composite's dropout draws.
/// scaled_dot_product_attention calls it from this many weights up (2^24: 64 MiB of
/// float32 per [.., Tq, Tk] tensor, of which the composite keeps several for backward;
/// below, the composite's BLAS products are faster than these kernels).
inline constexpr int64_t kFusedAttentionWeights = int64_t{1} << 24;
Tensor flash_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask = {},
                       double dropout_p = 0.0, bool train = false, Generator& gen = default_generator(),
                       Where where = Where::current());

// ---- loss ----
/// Label-smoothed cross-entropy, mean over non-ignored targets (PyTorch's
/// cross_entropy(label_smoothing=eps)): with log p = log_softmax(logits),
///   loss_i = (1 - eps) * (-log p[target_i]) + eps * mean_v(-log p_v)
/// logits [..., V] (float), target int64 [...]; target == ignore_index rows count
/// for nothing. When every target is ignored the loss is 0 with gradient 0
/// (PyTorch gives NaN). A target outside [0, V) is an Error naming it and V.
Tensor label_smoothed_cross_entropy(const Tensor& logits, const Tensor& target, double smoothing = 0.0,
                                    int64_t ignore_index = -100, Where where = Where::current());
/// gelu(x + bias), bias [D] added along x's last dim [.., D], in one pass: a Linear's
/// bias and the activation after it (docs/adding-an-op.md builds it step by step).
Tensor bias_gelu(const Tensor& x, const Tensor& bias, Where where = Where::current());
/// x Wᵀ + b, a Linear layer (x [.., in], W [out, in], bias [out] or undefined): the
/// product with the bias added to each block as it is finished, no second pass.
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = {}, Where where = Where::current());

/// PyTorch's F.cross_entropy for class-index targets, with its reduction:
///   loss_i = (1 - eps)·(-log p[target_i]) + eps·mean_v(-log p_v),  log p = log_softmax(logits)
/// 0 for rows whose target is ignore_index. mean: Σ loss_i / rows not ignored (the fused
/// label_smoothed_cross_entropy); sum: Σ loss_i; none: loss_i, in target's shape.
enum class Reduction { mean, sum, none };
struct CrossEntropyOptions {
  Reduction reduction = Reduction::mean;
  double label_smoothing = 0.0;
  int64_t ignore_index = -100;
};
Tensor cross_entropy(const Tensor& logits, const Tensor& target, const CrossEntropyOptions& options = {},
                     Where where = Where::current());
/// d loss / d logits for the 0-d output gradient `grad`:
///   (softmax(logits) - ((1 - eps) * onehot(target) + eps / V)) * grad / count,
/// zero rows for ignored targets; never materializes the one-hot.
Tensor label_smoothed_cross_entropy_backward(const Tensor& logits, const Tensor& target, const Tensor& grad,
                                             double smoothing = 0.0, int64_t ignore_index = -100,
                                             Where where = Where::current());

}  // namespace loom
