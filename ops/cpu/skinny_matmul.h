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
// registers. With AVX2's 16 registers of 8 lanes the tiles are too small to keep up
// with OpenBLAS's packed kernels: 3 x 4 tiles ran at 45-70 GFLOP/s against sgemm's
// 80-150 from 16 rows up (one thread, AMD EPYC Zen 3, 2026-11-26), so there a
// Linear's products stay with sgemm, and only tiny products take the AVX2 tiles.
// (Nor did the other order pay there: 6 x 16 tiles broadcasting X against a weight
// stored transposed, which needs no packing, ran at 55-75 against sgemm's 110-130
// from 32 rows up; only below 16 rows did either beat sgemm's packing every call.)
#include <cstdint>

namespace loom::detail {

// Products whose X has at most this many floats (16 rows of 256) take the skinny
// path (matmul.cpp). Each tile of W rows re-reads all of X, so X must stay in the
// core's cache; against OpenBLAS's sgemm it won up to 512 KB of X (rows 1 to 512, k
// 64 to 1024: 50-53 against 23-51 GFLOP/s of fused multiply-adds), but oneDNN's
// float32 gemm, which blocks from 2^17 multiply-adds go to where it has AVX-512 code,
// beats it on a training step's 256-row blocks: with the limit at 512 KB the small
// step's forward products took 102.6-105.7 ms, at 16 KB 90.2-92.3 ms, the step
// 436-450 ms against 426-429 (AMD EPYC Zen 4, 2 threads, alternated, 2026-11-27).
// Decoding's few-row products have packed weights (packed_matmul.h) and its
// one-query attention products stay here.
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
