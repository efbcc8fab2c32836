#pragma once
// bf16 matmul precision on the CPU, for a product autograd will differentiate (a
// Linear's): each operand is rounded to bfloat16 once, and the rounded copies are
// kept for backward (ops/src/matmul.cpp calls this; the kernels are matmul_bf16.cpp).
#include "loom/tensor.h"

namespace loom::detail {

// Whether a matrix (the last two dims) is stored column by column: the transpose of
// a row-major one.
inline bool stored_transposed(const Tensor& t) {
  const int64_t d = t.dim();
  return t.shape()[d - 2] > 1 && t.shape()[d - 1] > 1 && t.strides()[d - 2] == 1 && t.strides()[d - 1] != 1;
}

// Whether matmul(a, b) takes the round-once path: float32 2-D operands on the CPU in
// bf16 precision (with bf16 gemms), large enough, with a gradient to come.
bool rounds_once(const Tensor& a, const Tensor& b);

// a @ b from operands rounded once, recorded for autograd (no second derivative);
// with a bias (contiguous, [b's columns]), the linear op: a @ b + bias, the bias
// added to each block as its gemm finishes it (the bits of add(a @ b, bias)).
Tensor matmul_rounded_once(const Tensor& a, const Tensor& b, const Tensor& bias = {});

}  // namespace loom::detail
