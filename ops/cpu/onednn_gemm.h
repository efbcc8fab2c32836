#pragma once
// One matrix product with float32 sums and a float32 result, of bfloat16 operands
// (AVX512-BF16 or AMX code) or float32 ones, through oneDNN's matmul on the
// calling thread. The matmul kernels call it once per block inside their own
// OpenMP loop, where oneDNN runs single-threaded, so the bits do not depend on
// the thread count.
#include <cstdint>

#include "loom/bfloat16.h"

namespace loom::onednn {

// Whether oneDNN has bf16 code for this CPU (AVX512-BF16 or later in its effective
// ISA, which ONEDNN_MAX_CPU_ISA can lower).
bool bf16_available();
// Whether oneDNN has AVX-512 code for float32 here (with AVX2 only, its gemm is
// slower than OpenBLAS's per block: measured).
bool f32_avx512_available();

// c[m, n] = op(a)[m, k] @ op(b)[k, n], all row-major; op transposes when trans_*,
// and lda/ldb/ldc are the row strides of the matrices as stored.
void gemm_bf16(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const bfloat16* a, int64_t lda,
               const bfloat16* b, int64_t ldb, float* c, int64_t ldc);
void gemm_f32(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
              int64_t ldb, float* c, int64_t ldc);

}  // namespace loom::onednn
