#pragma once
// What the CPU matmul kernels (matmul.cpp: float32 and float64, matmul_bf16.cpp:
// bfloat16 operands) share: how a gemm reads an operand as stored, and how a
// product is split into blocks, each one single-threaded gemm.
#include <cblas.h>

#include <algorithm>
#include <cstdint>
#include <optional>

#include "loom/autograd.h"
#include "loom/ops.h"
#include "packed_matmul.h"

namespace loom::detail {

// How BLAS reads one matrix operand: a row-major view or a transposed one.
struct GemmOperand {
  CBLAS_TRANSPOSE trans;
  int64_t ld;
};

inline std::optional<GemmOperand> gemm_layout(int64_t rows, int64_t cols, int64_t row_stride, int64_t col_stride) {
  if ((cols == 1 || col_stride == 1) && (rows == 1 || row_stride >= std::max<int64_t>(cols, 1)))
    return GemmOperand{CblasNoTrans, rows == 1 ? std::max<int64_t>(cols, 1) : row_stride};
  if ((rows == 1 || row_stride == 1) && (cols == 1 || col_stride >= std::max<int64_t>(rows, 1)))
    return GemmOperand{CblasTrans, cols == 1 ? std::max<int64_t>(rows, 1) : col_stride};
  return std::nullopt;
}

// How a gemm reads t's last two dims. Neither row- nor column-major (e.g. a
// stride-0 row): t becomes a dense copy first (a kernel internal, outside autograd).
inline GemmOperand gemm_operand(Tensor& t) {
  auto layout = [&t] {
    const int64_t d = t.dim();
    return gemm_layout(t.shape()[d - 2], t.shape()[d - 1], t.strides()[d - 2], t.strides()[d - 1]);
  };
  if (auto stored = layout()) return *stored;
  NoGradGuard no_grad;
  t = contiguous(t);
  return *layout();
}

// Element (i, j) of a matrix stored row-major or transposed with leading dim ld.
template <typename T>
const T* element_at(const T* base, CBLAS_TRANSPOSE trans, int64_t ld, int64_t i, int64_t j) {
  return trans == CblasNoTrans ? base + i * ld + j : base + j * ld + i;
}

// An m x n product's blocks: of rows (m >= n) or of columns, `size` each (the last
// one shorter), fixed by the shape alone. Each is computed by a single-threaded
// gemm; OpenBLAS's and oneDNN's own threading split the inner dimension
// differently for different thread counts, which changes the rounding; this split
// does not, so the bits are the same for any thread count.
// Blocks of up to 256 rows (smaller ones re-pack the other operand too often), in
// an even number from 128 rows up so that two cores get equal shares (768 rows as
// 3 x 256 would leave one idle for a third of the product; `loom bench step
// --preset base --profile`).
// Below 128, one block: a tiny product is not worth a second gemm call.
struct ProductBlocks {
  bool split_rows;
  int64_t size, count;

  int64_t start(int64_t block) const { return block * size; }
  int64_t length(int64_t block, int64_t m, int64_t n) const {
    return std::min(size, (split_rows ? m : n) - start(block));
  }
};

inline ProductBlocks product_blocks(int64_t m, int64_t n) {
  const bool split_rows = m >= n;
  const int64_t split_size = split_rows ? m : n;
  const int64_t even_blocks = split_size < 128 ? 1 : ((split_size + 255) / 256 + 1) / 2 * 2;
  const int64_t size = ((split_size + even_blocks - 1) / even_blocks + 15) / 16 * 16;
  return {split_rows, size, (split_size + size - 1) / size};
}

// The linear op's bias, if any, added to one block of an m x n product as `split`
// cuts it (count rows or columns from start), just after its gemm wrote it.
template <typename T>
void add_bias_to_block(const ProductBlocks& split, T* c, int64_t start, int64_t count, int64_t m, int64_t n,
                       const T* bias) {
  if (!bias) return;
  if (split.split_rows)
    add_bias(c + start * n, n, count, n, bias);
  else
    add_bias(c + start, n, m, count, bias + start);
}

}  // namespace loom::detail
