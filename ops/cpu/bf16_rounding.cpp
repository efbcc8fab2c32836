// Rounding float32 to bfloat16 for matmuls (bf16_rounding.h): VCVTNE2PS2BF16
// where the CPU has it, the same arithmetic in integers elsewhere.
#include "bf16_rounding.h"

#include <cstring>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define LOOM_HAS_BF16_CONVERT 1
#else
#define LOOM_HAS_BF16_CONVERT 0
#endif

namespace loom::detail {

namespace {

void round_row_portable(const float* row, int64_t cols, uint16_t* out) {
#pragma omp simd
  for (int64_t c = 0; c < cols; ++c) out[c] = matmul_bf16_bits(row[c]);
}

#if LOOM_HAS_BF16_CONVERT
// 32 values per instruction; the tail (cols % 32) through the portable loop.
__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"))) void round_row_avx512bf16(const float* row,
                                                                                          int64_t cols,
                                                                                          uint16_t* out) {
  int64_t c = 0;
  for (; c + 32 <= cols; c += 32) {
    const __m512bh pair = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(row + c + 16), _mm512_loadu_ps(row + c));
    __m512i bits;
    std::memcpy(&bits, &pair, sizeof bits);
    _mm512_storeu_si512(out + c, bits);
  }
  round_row_portable(row + c, cols - c, out + c);
}
#endif

bool has_bf16_convert() {
#if LOOM_HAS_BF16_CONVERT
  static const bool has = __builtin_cpu_supports("avx512bf16");
  return has;
#else
  return false;
#endif
}

}  // namespace

void round_rows_to_bf16(const float* data, int64_t rows, int64_t cols, int64_t ld, bfloat16* out) {
  auto* bits = reinterpret_cast<uint16_t*>(out);
  for (int64_t r = 0; r < rows; ++r) {
#if LOOM_HAS_BF16_CONVERT
    if (has_bf16_convert()) {
      round_row_avx512bf16(data + r * ld, cols, bits + r * cols);
      continue;
    }
#endif
    round_row_portable(data + r * ld, cols, bits + r * cols);
  }
}

}  // namespace loom::detail
