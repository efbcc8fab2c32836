#pragma once
// Triangles and index reads on the GPU (triu/tril, gather, index_select); pad
// and cat need no kernel of their own (fill + the copy kernel, shape_ops.cpp).
#include <cuda_runtime_api.h>

#include "loom/cuda/launch.h"

namespace loom::cuda {

// A dense out over `ndim` dims (sizes) read from x at x_strides (unmerged:
// the kernels need each element's coordinates).
struct Box {
  int ndim = 0;
  int64_t numel = 0;
  int64_t sizes[kMaxDims] = {}, x_strides[kMaxDims] = {};
};

// out = x where column - row >= diagonal (upper) or <= diagonal (lower) in the last two dims, else 0.
template <typename T>
void launch_triangle(bool upper, int64_t diagonal, const Box& box, void* out, const void* x, cudaStream_t stream);

// out = x with the coordinate along `dim` replaced by index[coordinate] (index_select)
// or by index[element] (gather, index of out's shape). Indices already checked.
template <typename T>
void launch_index_read(bool per_element, int dim, const Box& box, void* out, const void* x, const int64_t* index,
                       cudaStream_t stream);

// index_add / scatter_add: out (dense) += src (dense) at index along `dim`, in
// index order. One thread per output element (over src's other dims) walks
// src's positions along dim in order and adds those whose index hits it: the
// CPU's order and rounding, no atomics. Quadratic in the indexed dim (a
// sort-based pass would be faster for long ones).
struct AccumulateBox {
  int ndim = 0, dim = 0;
  int64_t work = 0;              // src's elements with dim's size replaced by out's
  int64_t sizes[kMaxDims] = {};  // src's sizes, out's size along dim
  int64_t out_strides[kMaxDims] = {}, src_strides[kMaxDims] = {};
  int64_t positions = 0;  // src's size along dim
};
template <typename T>
void launch_index_accumulate(bool per_element, const AccumulateBox& box, void* out, const void* src,
                             const int64_t* index, cudaStream_t stream);

}  // namespace loom::cuda
