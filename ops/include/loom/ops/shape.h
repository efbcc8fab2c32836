#pragma once
// Reductions beyond sum (max, logsumexp, variance), indexing, joining/splitting
// and the embedding lookup. Each primitive is defined with its derivative and
// its gradient-check samples in ops/src/<name>.cpp; composites say so below.
#include <utility>
#include <vector>

#include "loom/ops.h"

namespace loom {

// ---- reductions (dims empty = all dims; keepdim leaves them as size 1) ----
// Largest value over dims. Gradient is split evenly among tied maxima (as torch.amax).
Tensor amax(const Tensor& x, const Shape& dims = {}, bool keepdim = false, Where where = Where::current());
// Smallest value over dims, the same way.
Tensor amin(const Tensor& x, const Shape& dims = {}, bool keepdim = false, Where where = Where::current());
// Index (int64) of the largest (smallest) value along dim; the first one on ties, a
// NaN first of all. Not differentiable.
Tensor argmax(const Tensor& x, int64_t dim, bool keepdim = false, Where where = Where::current());
Tensor argmin(const Tensor& x, int64_t dim, bool keepdim = false, Where where = Where::current());
// Largest (smallest) values along dim and where they are. Composite: argmax (argmin),
// then gather, so the values' gradient goes to those positions only.
struct ValuesAndIndices {
  Tensor values;
  Tensor indices;  // int64
};
ValuesAndIndices max(const Tensor& x, int64_t dim, bool keepdim = false, Where where = Where::current());
ValuesAndIndices min(const Tensor& x, int64_t dim, bool keepdim = false, Where where = Where::current());
// log(sum(exp(x))) over dims, computed without overflow (relative to the max).
Tensor logsumexp(const Tensor& x, const Shape& dims = {}, bool keepdim = false, Where where = Where::current());
// Variance over dims: sum((x - mean)^2) / (N - correction); correction=1 is unbiased.
Tensor var(const Tensor& x, const Shape& dims = {}, bool keepdim = false, int64_t correction = 1,
           Where where = Where::current());
// One dim as an integer: amax(x, -1), amin(x, 0), logsumexp(x, 1, true), var(x, -1).
inline Tensor amax(const Tensor& x, DimIndex auto dim, bool keepdim = false, Where where = Where::current()) {
  return amax(x, Shape{int64_t(dim)}, keepdim, where);
}
inline Tensor amin(const Tensor& x, DimIndex auto dim, bool keepdim = false, Where where = Where::current()) {
  return amin(x, Shape{int64_t(dim)}, keepdim, where);
}
inline Tensor logsumexp(const Tensor& x, DimIndex auto dim, bool keepdim = false, Where where = Where::current()) {
  return logsumexp(x, Shape{int64_t(dim)}, keepdim, where);
}
inline Tensor var(const Tensor& x, DimIndex auto dim, bool keepdim = false, int64_t correction = 1,
                  Where where = Where::current()) {
  return var(x, Shape{int64_t(dim)}, keepdim, correction, where);
}

// ---- joining and splitting ----
// Joins tensors along an existing dim; all other dims must match.
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim = 0, Where where = Where::current());
// Joins tensors along a new dim. Composite: unsqueeze + cat.
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim = 0, Where where = Where::current());
// Pieces of `size` along dim (the last may be smaller). Composite: views by narrow.
std::vector<Tensor> split(const Tensor& x, int64_t size, int64_t dim = 0, Where where = Where::current());
// `chunks` pieces of ceil(size / chunks) along dim (fewer when it divides so). Composite.
std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim = 0, Where where = Where::current());

// ---- indexing (index tensors are int64) ----
// Entries of x at `index` (1-D) along dim: out.shape[dim] = index.numel().
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index, Where where = Where::current());
// self with source's slices added at `index` along dim (repeated indices accumulate).
// index_select's gradient: index_add(zeros, dim, index, g).
Tensor index_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source,
                 Where where = Where::current());
// out[i][j][k] = x[i][index[i][j][k]][k] for dim=1 (out has index's shape).
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index, Where where = Where::current());
// self with src added at index along dim: out[i][index[i][j][k]][k] += src[i][j][k] (dim=1).
// gather's gradient: scatter_add(zeros, dim, index, g).
Tensor scatter_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src,
                   Where where = Where::current());

// ---- padding and triangles ----
// Constant padding like torch.nn.functional.pad: pads = {left, right} for the last
// dim, then {left, right} for the one before, ... (non-negative).
Tensor pad(const Tensor& x, const Shape& pads, double value = 0.0, Where where = Where::current());
// Keeps the upper triangle of the last two dims (j - i >= diagonal), zeroes the rest.
Tensor triu(const Tensor& x, int64_t diagonal = 0, Where where = Where::current());
// Keeps the lower triangle of the last two dims (j - i <= diagonal), zeroes the rest.
Tensor tril(const Tensor& x, int64_t diagonal = 0, Where where = Where::current());
// bool [n, n], true above the diagonal (j > i): the future positions a decoder must not see.
Tensor causal_mask(int64_t n, Device device = kCPU);

// ---- embedding ----
// Rows of weight [V, D] picked by ids (int64, any shape): out is [..., D]. Rows at
// padding_idx get no gradient (-1: none). An id outside [0, V) is an Error.
Tensor embedding(const Tensor& weight, const Tensor& ids, int64_t padding_idx = -1, Where where = Where::current());
// embedding's gradient: grad [..., D] summed into a [V, D] table by id (row
// padding_idx stays zero). Deterministic for any thread count.
Tensor embedding_backward(const Tensor& grad, const Tensor& ids, int64_t vocab_size, int64_t padding_idx = -1,
                          Where where = Where::current());

}  // namespace loom
