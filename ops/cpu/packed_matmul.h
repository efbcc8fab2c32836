#pragma once
// float32 products X W^T (a Linear's layout, W [n, k]) against a weight packed
// once for many products: decoding's projections. OpenBLAS 0.3.21's sgemm packs
// the whole weight again on every call, however few rows it multiplies, and
// decoding calls it with a handful of rows per step. On CPUs with AVX-512 it also
// beats the skinny kernel (skinny_matmul.h), which re-reads X for every tile of
// weight rows: beam 4 took 17.1-18.2 s against 21.0-21.6 s there (AMD EPYC Zen 4,
// 2 threads, a 1-epoch model, 2026-11-27), with the same translations.
//
// The packed copy holds W's rows in panels of 16 (the last one zero-padded), each
// panel k-major: its 16 weights of input p are 16 consecutive floats. A tile of up
// to 6 rows of X by one panel keeps 12 AVX2 accumulators in registers and streams
// the panel once. Each element of C is one chain of fused multiply-adds over
// p = 0, 1, ..., k - 1, starting from 0, whatever m, n, the tile it falls in or the
// thread count: so a row's results depend on no other row of the call (a sentence's
// translation on no other sentence of its batch), and the reference kernel, a plain
// loop of std::fma, gives the same bits.
#include <cstdint>
#include <memory>
#include <vector>

namespace loom::detail {

struct PackedWeight {
  int64_t n = 0, k = 0;       // W's shape: n outputs of k inputs
  std::vector<float> panels;  // ceil(n / 16) panels of k x 16 floats
};

// W [n, k] with row stride ldw, packed.
PackedWeight pack_weight(const float* w, int64_t n, int64_t k, int64_t ldw);

// c[i * ldc + j] = sum_p x[i * ldx + p] * W[j][p] for i < m, j < w.n, p < w.k, each
// element one chain of fused multiply-adds over p in order (the reference that
// tests/test_matmul_precision.cpp writes out and compares bit for bit).
void packed_matmul(int64_t m, const float* x, int64_t ldx, const PackedWeight& w, float* c, int64_t ldc);

// The packed copy of a weight that a live PackedWeights guard (loom/ops/packed_weights.h)
// registered, for W [n, k] at w with row stride ldw; null if none is.
std::shared_ptr<const PackedWeight> packed_weight_of(const float* w, int64_t n, int64_t k, int64_t ldw);

}  // namespace loom::detail
