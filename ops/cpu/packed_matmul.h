#pragma once
// float32 products X W^T (a Linear's layout, W [n, k]) against a weight packed
// once for many products: decoding's projections. OpenBLAS 0.3.21's sgemm packs
// the whole weight again on every call, however few rows it multiplies, and
// decoding calls it with a handful of rows per step. On CPUs with AVX-512 it also
// beats the skinny kernel (skinny_matmul.h), which re-reads X for every tile of
// weight rows (`bench/decode.sh`: beam 4, the same translations).
//
// The packed copy holds W's rows in panels of 16 (the last one zero-padded), each
// panel k-major: its 16 weights of input p are 16 consecutive floats. A tile of up
// to 6 rows of X by one panel keeps 12 AVX2 accumulators in registers and streams
// the panel once. Each element of C is one chain of fused multiply-adds over
// p = 0, 1, ..., k - 1, starting from 0, whatever m, n, the tile it falls in or the
// thread count: so a row's results depend on no other row of the call (a sentence's
// translation on no other sentence of its batch), and the reference kernel, a plain
// loop of std::fma, gives the same bits.
//
// In bf16 matmul precision (loom/matmul_precision.h) on a CPU with AVX512-BF16, a
// weight packed then gets a bfloat16 copy instead (packed_matmul_bf16.cpp): half
// the bytes, and on decoding's wider weights 1.5-2x the float32 kernel's speed.
// Its chain is VDPBF16PS's, over pairs of inputs: see packed_matmul_bf16.
#include <cstdint>
#include <memory>
#include <vector>

namespace loom::detail {

// One of the two copies, the other empty.
struct PackedWeight {
  int64_t n = 0, k = 0;       // W's shape: n outputs of k inputs
  std::vector<float> panels;  // ceil(n / 16) panels of k x 16 floats
  // ceil(n / 16) panels of ceil(k / 2) x 16 pairs: W[j][2q] rounded to bfloat16
  // in the low half of a pair, W[j][2q + 1] (0 past k) in the high half.
  std::vector<uint32_t> bf16_pairs;
};

// W [n, k] with row stride ldw, packed: its bfloat16 copy if with_bf16 and
// packed_bf16_available(), its float32 copy otherwise.
PackedWeight pack_weight(const float* w, int64_t n, int64_t k, int64_t ldw, bool with_bf16 = false);

// W's bfloat16 copy as PackedWeight::bf16_pairs lays it out.
std::vector<uint32_t> pack_bf16_pairs(const float* w, int64_t n, int64_t k, int64_t ldw);

// Whether this CPU runs packed_matmul_bf16 (AVX512-BF16, and AVX-512 not turned off).
bool packed_bf16_available();

// c[i * ldc + j] = sum_p x[i * ldx + p] * W[j][p] for i < m, j < w.n, p < w.k, each
// element one chain of fused multiply-adds over p in order (the reference that
// tests/test_matmul_precision.cpp writes out and compares bit for bit).
// With a bias (w.n floats), bias[j] is added to each element as its tile is
// finished (add_bias): a Linear's product and bias in one pass (the linear op).
void packed_matmul(int64_t m, const float* x, int64_t ldx, const PackedWeight& w, float* c, int64_t ldc,
                   const float* bias = nullptr);

// The same product by w's bfloat16 copy (w.bf16_pairs not empty), each row of X
// rounded to bfloat16 first (bf16_rounding.h). Each element of C is VDPBF16PS's
// chain over the pairs q = 0, 1, ..., ceil(k / 2) - 1, starting from 0:
//   acc = (acc + x[2q + 1] * W[j][2q + 1]) + x[2q] * W[j][2q]
// in float32 (each product of two bfloat16 values exact, each sum rounded to
// nearest even, denormals flushed to zero), any m, tile or thread count; the
// reference that tests/test_matmul_precision.cpp writes out.
// A bias is added as packed_matmul's is.
void packed_matmul_bf16(int64_t m, const float* x, int64_t ldx, const PackedWeight& w, float* c, int64_t ldc,
                        const float* bias = nullptr);

// c[i * ldc + j] += bias[j] for i < rows, j < columns: the linear op's bias, added
// to a block of the product while it is still in cache. One rounded sum per
// element, as add(product, bias) computes it, so the bits are the same.
template <typename T>
void add_bias(T* c, int64_t ldc, int64_t rows, int64_t columns, const T* bias) {
  for (int64_t i = 0; i < rows; ++i)
#pragma omp simd
    for (int64_t j = 0; j < columns; ++j) c[i * ldc + j] += bias[j];
}

// The packed copy of a weight that a live PackedWeights guard (loom/ops/packed_weights.h)
// registered, for W [n, k] at w with row stride ldw; null if none is.
std::shared_ptr<const PackedWeight> packed_weight_of(const float* w, int64_t n, int64_t k, int64_t ldw);

}  // namespace loom::detail
