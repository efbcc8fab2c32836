// Rounding float32 to bfloat16 (bf16_rounding.h): VCVTNE2PS2BF16 where the CPU
// has it, the integer arithmetic of bfloat16.h elsewhere.
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
  for (int64_t c = 0; c < cols; ++c) out[c] = bfloat16::round_to_bf16_bits(row[c]);
}

#if LOOM_HAS_BF16_CONVERT
#define LOOM_TARGET_BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))

// Lanes holding a nonzero denormal (magnitude bits in [1, 2^23)), which the instruction would flush.
LOOM_TARGET_BF16 inline __mmask16 denormal_lanes(__m512 v) {
  const __m512i magnitude = _mm512_and_si512(_mm512_castps_si512(v), _mm512_set1_epi32(0x7fffffff));
  return _mm512_cmplt_epu32_mask(_mm512_sub_epi32(magnitude, _mm512_set1_epi32(1)), _mm512_set1_epi32(0x7fffff));
}

// 32 values per instruction; groups with a denormal and the tail (cols % 32) the portable way.
LOOM_TARGET_BF16 void round_row_avx512bf16(const float* row, int64_t cols, uint16_t* out) {
  int64_t c = 0;
  for (; c + 32 <= cols; c += 32) {
    const __m512 low = _mm512_loadu_ps(row + c), high = _mm512_loadu_ps(row + c + 16);
    if (denormal_lanes(low) | denormal_lanes(high)) {
      round_row_portable(row + c, 32, out + c);
      continue;
    }
    const __m512bh pair = _mm512_cvtne2ps_pbh(high, low);
    __m512i bits;
    std::memcpy(&bits, &pair, sizeof bits);
    _mm512_storeu_si512(out + c, bits);
  }
  round_row_portable(row + c, cols - c, out + c);
}
#endif

}  // namespace

bool cpu_has_avx512_bf16() {
#if LOOM_HAS_BF16_CONVERT
  static const bool has = __builtin_cpu_supports("avx512bf16");
  return has;
#else
  return false;
#endif
}

void round_rows_to_bf16(const float* data, int64_t rows, int64_t cols, int64_t ld, bfloat16* out) {
  auto* bits = reinterpret_cast<uint16_t*>(out);
  for (int64_t r = 0; r < rows; ++r) {
#if LOOM_HAS_BF16_CONVERT
    if (cpu_has_avx512_bf16()) {
      round_row_avx512bf16(data + r * ld, cols, bits + r * cols);
      continue;
    }
#endif
    round_row_portable(data + r * ld, cols, bits + r * cols);
  }
}

}  // namespace loom::detail
