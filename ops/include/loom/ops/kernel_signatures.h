#pragma once
// What each op hands its kernels: the signatures under which every device
// registers them in the kernel table (loom/kernel_table.h). The op has checked
// shapes and dtypes and allocated the outputs; a kernel only computes. Unless
// said otherwise an output is fresh and contiguous, inputs may be any view.
#include "loom/ops/updates.h"
#include "loom/tensor.h"

namespace loom::kernels {

// Up to two scalar attributes of an elementwise op (pow's exponent, clamp's bounds).
struct Scalars {
  double a = 0, b = 0;
};

// ---- elementwise (ops/cpu/elementwise.cpp: one line per op) ----
// out = f(x); out has x's shape.
using UnaryKernel = void (*)(const Tensor& out, const Tensor& x, const Scalars& scalars);
// out = f(a, b), a and b broadcast to out's shape.
using BinaryKernel = void (*)(const Tensor& out, const Tensor& a, const Tensor& b);
// out = f(condition, a, b), all three broadcast to out's shape (where).
using TernaryKernel = void (*)(const Tensor& out, const Tensor& condition, const Tensor& a, const Tensor& b);

// ---- reductions ----
// out = the reduction of x over `dims` (sorted, distinct); out has x's shape
// with those dims removed or kept as 1 (the same element order either way).
using ReduceKernel = void (*)(const Tensor& out, const Tensor& x, const Shape& dims);

// ---- copies ----
// dst = src converted to dst's dtype; src is a view of dst's shape (stride 0
// where broadcast), dst any view. Registered under src's dtype.
using CopyKernel = void (*)(const Tensor& dst, const Tensor& src);

// ---- parameter updates (ops/src/adam_step.cpp, sgd_step.cpp): all contiguous, one shape ----
using AdamStepKernel = void (*)(const Tensor& w, const Tensor& grad, const Tensor& m, const Tensor& v,
                                const AdamStep& step);
// adam_step_ of each parameter k with steps[k] (ops/src/adam_steps.cpp): one dtype and device.
using AdamStepsKernel = void (*)(const std::vector<Tensor>& w, const std::vector<Tensor>& grad,
                                 const std::vector<Tensor>& m, const std::vector<Tensor>& v,
                                 const std::vector<AdamStep>& steps);
// momentum_buffer is undefined when step.momentum is 0.
using SgdStepKernel = void (*)(const Tensor& w, const Tensor& grad, const Tensor& momentum_buffer, const SgdStep& step);

// ---- attention (ops/src/flash_attention.cpp) ----
// q [B, Tq, D], k [B, Tk, D], v [B, Tk, Dv] dense; mask undefined, or a view of shape
// [batch..., Tq, Tk] (the batch dims' product B; stride 0 where broadcast), bool (true =
// masked) or additive of q's dtype. Dropout keeps weight (b, i, j) as dropout would keep
// element (b Tq + i) Tk + j of the [B, Tq, Tk] weights at (seed, offset).
struct AttentionArgs {
  double scale = 1, dropout_p = 0;
  uint64_t seed = 0, offset = 0;
};
inline AttentionArgs rebase_random(AttentionArgs args, uint64_t offset) {
  args.offset += offset;
  return args;
}
// out [B, Tq, Dv] and lse [B, Tq] (each row's log-sum-exp of its scores, -inf where
// every key is masked; that row's out is 0).
using AttentionKernel = void (*)(const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k,
                                 const Tensor& v, const Tensor& mask, const AttentionArgs& args);
// dq, dk, dv (q's, k's and v's shapes) from grad [B, Tq, Dv] and the forward's out and lse.
using AttentionBackwardKernel = void (*)(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& grad,
                                         const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
                                         const Tensor& out, const Tensor& lse, const AttentionArgs& args);

// ---- rows: the fused last-dim ops; x, y and grad are dense ----
// out = softmax or log_softmax of x's rows under mask (undefined, bool = masked,
// or additive of x's dtype), the mask read as broadcast to x's shape.
using MaskedRowsKernel = void (*)(const Tensor& out, const Tensor& x, const Tensor& mask);
// out = the row op's backward from its output y and the incoming gradient.
using RowBackwardKernel = void (*)(const Tensor& out, const Tensor& y, const Tensor& grad);

// ---- reductions, triangles, pad, cat, arange (ops/cpu/amax.cpp, argmax.cpp, logsumexp.cpp, var.cpp,
//      triu.cpp, pad.cpp, cat.cpp, factory.cpp) ----
// amax, argmax (out int64, registered under x's dtype) and logsumexp are ReduceKernels.
// out = sum over dims of centred^2, divided by divisor (var: centred = x - mean over dims).
using VarKernel = void (*)(const Tensor& out, const Tensor& centred, const Shape& dims, double divisor);
// out = x where the last two dims' (row, column) lies in the triangle, 0 elsewhere:
// column - row >= diagonal (triu) or <= diagonal (tril); out has x's shape.
using TriangleKernel = void (*)(const Tensor& out, const Tensor& x, int64_t diagonal);
// out = value everywhere, with x written at [left[d], left[d] + x.size(d)) in each dim d.
using PadKernel = void (*)(const Tensor& out, const Tensor& x, const Shape& left, double value);
// out = inputs one after another along dim (all of out's dtype; other dims equal to out's).
using CatKernel = void (*)(const Tensor& out, const std::vector<Tensor>& inputs, int64_t dim);
// out[i] = i for a fresh 1-D out.
using ArangeKernel = void (*)(const Tensor& out);

// ---- fused: layer norm, cross-entropy, dropout (ops/cpu/layer_norm.cpp, cross_entropy.cpp, dropout.cpp) ----
// out = layer_norm(x, weight, bias, eps) over x's rows (last dim D); weight and
// bias are [D] or undefined. stats ([rows, 2]) gets each row's (mean, rstd) for the backward.
using LayerNormKernel = void (*)(const Tensor& out, const Tensor& stats, const Tensor& x, const Tensor& weight,
                                 const Tensor& bias, double eps);
// One sweep over (x, grad): dx = r * P(grad * weight) and params = [dw; db] ([2, D]);
// either output may be undefined (not wanted), weight too (no affine). stats: the
// forward's (mean, rstd) per row, or undefined (computed again).
using LayerNormBackwardKernel = void (*)(const Tensor& dx, const Tensor& params, const Tensor& x, const Tensor& weight,
                                         const Tensor& grad, const Tensor& stats, double eps);

// out = f(x + bias): bias [D] added along the last dim of x [.., D], then the activation,
// in one pass (bias_gelu: ops/cpu/bias_gelu.cpp); x and bias dense.
using BiasActivationKernel = void (*)(const Tensor& out, const Tensor& x, const Tensor& bias);

// Label-smoothed cross-entropy's attributes; `op` names the op in the kernel's
// error (a target id neither in [0, V) nor ignore_index).
struct CrossEntropyArgs {
  std::string_view op;
  double smoothing = 0;
  int64_t ignore_index = -100;
};
// loss (0-d) = the mean row loss over the rows of logits ([rows, V]) whose int64
// target is not ignore_index (0 when there are none). Registered under the logits' dtype.
using CrossEntropyKernel = void (*)(const Tensor& loss, const Tensor& logits, const Tensor& target,
                                    const CrossEntropyArgs& args);
// out = d loss / d logits times grad (one value).
using CrossEntropyBackwardKernel = void (*)(const Tensor& out, const Tensor& logits, const Tensor& target,
                                            const Tensor& grad, const CrossEntropyArgs& args);

// Dropout's keep mask: bit i % 32 of int32 word i / 32 for element i.
inline constexpr int64_t kDropoutMaskBits = 32;
inline int64_t dropout_mask_words(int64_t elements) { return (elements + kDropoutMaskBits - 1) / kDropoutMaskBits; }
// One random op's draw: its probability and where in the Philox stream it draws.
struct DropoutDraw {
  double p;
  uint64_t seed, offset;
};
// A replay of recorded calls (the stand-in's captured work, loom/kernel_table.h) draws
// from its own offset on: each draw moved by it.
inline DropoutDraw rebase_random(DropoutDraw draw, uint64_t offset) {
  draw.offset += offset;
  return draw;
}
// out = keep * x / (1 - p), keep_i = (uniform_i >= p) from Philox(seed, offset) at
// element i; mask gets the keep bits (dropout_mask_words(x's numel) words).
using DropoutKernel = void (*)(const Tensor& out, const Tensor& mask, const Tensor& x, DropoutDraw draw);
// out = keep * grad / (1 - p), keep read from mask.
using DropoutBackwardKernel = void (*)(const Tensor& out, const Tensor& grad, const Tensor& mask, double p);
// relu_dropout's kernels: DropoutKernel's with max(x, 0) in place of x, and
// out = keep * [x > 0] * grad / (1 - p) for its backward.
using ReluDropoutBackwardKernel = void (*)(const Tensor& out, const Tensor& x, const Tensor& grad, const Tensor& mask,
                                           double p);
// dropout_add_layer_norm (ops/cpu/dropout_add_layer_norm.cpp): h = x + dropout(s) with
// dropout's draws (its keep bits to mask), then out = layer_norm(h, weight, bias, eps)
// with each row's (mean, rstd) to stats; h is kept for the backward. All dense.
using DropoutAddLayerNormKernel = void (*)(const Tensor& out, const Tensor& h, const Tensor& stats, const Tensor& mask,
                                           const Tensor& x, const Tensor& s, const Tensor& weight, const Tensor& bias,
                                           DropoutDraw draw, double eps);

// ---- matmul and indexing (ops/cpu/matmul.cpp, gather.cpp, index_select.cpp, index_add.cpp,
//      scatter_add.cpp, embedding.cpp) ----
// out [batch..., M, N] = a @ b per batch; a [batch..., M, K] and b [batch..., K, N]
// are views already broadcast to out's batch dims (stride 0 where broadcast).
// out has a's dtype, or is float32 for bfloat16 operands (float32 sums kept).
using MatmulKernel = void (*)(const Tensor& out, const Tensor& a, const Tensor& b);
// linear: out [M, N] = x @ w_t + bias, x [M, K], w_t [K, N] (a Linear's weight.t()),
// bias [N] dense: the matmul kernel's product with the bias added to each block as
// it is finished (ops/cpu/matmul.cpp), the same bits as the product and then add.
using LinearKernel = void (*)(const Tensor& out, const Tensor& x, const Tensor& w_t, const Tensor& bias);
// linear_param_grads: out [N·K + N] = [gᵀ x (row-major [N, K]); Σ_rows g] for g [M, N]
// and x [M, K] (both dense): the weight's and the bias's gradients of a linear op.
using LinearParamGradsKernel = void (*)(const Tensor& out, const Tensor& g, const Tensor& x);
// gather, index_select: out = x's elements picked along `dim` by `index` (contiguous
// int64; gather: out's shape, index_select: 1-D). The kernel checks every index
// against x.size(dim) before it writes and throws an Error naming the op and the index.
using IndexReadKernel = void (*)(const Tensor& out, const Tensor& x, int64_t dim, const Tensor& index);
// scatter_add, index_add: out (contiguous, holding self's values) += src at `index`
// along `dim` (index contiguous int64: scatter_add src's shape, index_add 1-D; src
// contiguous); repeated indices accumulate in index order. Index checks as above.
using IndexAccumulateKernel = void (*)(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src);
// embedding: out [..., D] = weight [V, D] rows at ids (contiguous int64, any shape).
// Every id is checked against V first ("<op>: id 9 is out of range for a vocabulary of 8").
using EmbeddingKernel = void (*)(const Tensor& out, const Tensor& weight, const Tensor& ids);
// embedding_backward: out [V, D] (uninitialized: the kernel writes every row) = the
// sum of grad's rows (grad contiguous, read as [ids.numel(), D]) per id; row
// padding_idx (-1: none) stays 0. Ids checked as for embedding.
using EmbeddingBackwardKernel = void (*)(const Tensor& out, const Tensor& grad, const Tensor& ids, int64_t padding_idx);

}  // namespace loom::kernels
