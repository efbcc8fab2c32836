#pragma once
// What each op hands its kernels: the signatures under which every device
// registers them in the kernel table (loom/kernel_table.h). The op has checked
// shapes and dtypes and allocated the outputs; a kernel only computes. Unless
// said otherwise an output is fresh and contiguous, inputs may be any view.
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

// ---- rows: the fused last-dim ops; x, y and grad are dense ----
// out = softmax or log_softmax of x's rows under mask (undefined, bool = masked,
// or additive of x's dtype), the mask read as broadcast to x's shape.
using MaskedRowsKernel = void (*)(const Tensor& out, const Tensor& x, const Tensor& mask);
// out = the row op's backward from its output y and the incoming gradient.
using RowBackwardKernel = void (*)(const Tensor& out, const Tensor& y, const Tensor& grad);

// ---- matmul and indexing (ops/cpu/matmul.cpp, gather.cpp, index_select.cpp, index_add.cpp,
//      scatter_add.cpp, embedding.cpp) ----
// out [batch..., M, N] = a @ b per batch; a [batch..., M, K] and b [batch..., K, N]
// are views already broadcast to out's batch dims (stride 0 where broadcast).
using MatmulKernel = void (*)(const Tensor& out, const Tensor& a, const Tensor& b);
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
using EmbeddingBackwardKernel = void (*)(const Tensor& out, const Tensor& grad, const Tensor& ids,
                                         int64_t padding_idx);

}  // namespace loom::kernels
