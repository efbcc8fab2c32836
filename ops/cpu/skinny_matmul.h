#pragma once
// float32 products with a few rows against a weight stored one row per output,
// C = X W^T with X [m, k] and W [n, k] (a Linear's layout): decoding's
// projections, which feed a handful of rows per step. OpenBLAS 0.3.21 packs the
// whole weight block on every call, however few rows it multiplies (a third of
// beam search's sgemm time, measured), and has no API to pack it once. Here each
// output is a dot product read straight from the two rows, with the weight rows
// streamed once per call and the few X rows kept in cache.
//
// Every dot product sums in the same order whatever m, n or the tile it falls in:
// 16 lanes of fused multiply-adds over k (the last k % 16 zero-padded), then the
// lanes added in a fixed tree. So a row's result depends neither on the other rows
// of the call nor on the thread count.
//
// AVX-512 (loom/cpu.h: avx512_enabled()): 16 accumulators of 16 lanes fit its 32
// registers. AVX2's 16 registers of 8 lanes make tiles too small to keep up with
// OpenBLAS's packed kernels from 16 rows up, so there a Linear's products stay with
// sgemm and only tiny products take the AVX2 tiles (`loom bench ops --filter matmul`,
// `bench/decode.sh` measure both sides).
#include <cstdint>

namespace loom::detail {

// Products whose X has at most this many floats (16 rows of 256) take the skinny
// path (matmul.cpp): each tile of W rows re-reads all of X, and above this oneDNN's
// blocked float32 gemm wins a training step's 256-row blocks (`loom bench step
// --profile`). Decoding's few-row products have packed weights (packed_matmul.h)
// and its one-query attention products stay here.
inline constexpr int64_t kSkinnyRowFloats = int64_t{1} << 12;

// Whether skinny_matmul can run: an x86-64 build on a CPU with AVX-512 enabled.
bool skinny_matmul_available();

// c[i * ldc + j] = sum_p x[i * ldx + p] * w[j * ldw + p], for i < m, j < n.
void skinny_matmul(int64_t m, int64_t n, int64_t k, const float* x, int64_t ldx, const float* w, int64_t ldw, float* c,
                   int64_t ldc);

// Products of at most this many multiply-adds (decoding's one-query attention
// products per head, 1 x t x 64, a batch of hundreds per call) cost sgemm more to
// call than to compute: each is computed in place by the two tiny_matmul kernels.
inline constexpr int64_t kTinyProduct = int64_t{1} << 13;

// Beam search lets a sentence's beams attend to its source together: a product of
// a few rows (at most kTinyRows) is tiny when one row's is, so that each row takes the
// kernel, and so gets the bits, that it would take alone.
inline constexpr int64_t kTinyRows = 16;
inline bool tiny_product(int64_t m, int64_t n, int64_t k) {
  return m * n * k <= kTinyProduct || (m <= kTinyRows && n * k <= kTinyProduct);
}

// c = x w^T as skinny_matmul, in AVX2's 8 lanes (x86-64-v3, every CPU loom runs on).
void tiny_matmul_transposed(int64_t m, int64_t n, int64_t k, const float* x, int64_t ldx, const float* w, int64_t ldw,
                            float* c, int64_t ldc);

// c[i * ldc + j] = sum_p a[i * lda + p] * b[p * ldb + j], b stored row-major: each
// row of c is a sum of b's rows, added in p's order, whatever m, n or the threads.
void tiny_matmul(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
                 int64_t ldc);

}  // namespace loom::detail
