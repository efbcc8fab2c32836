// Products against a weight's bfloat16 packed copy (packed_matmul.h): bf16
// decoding on CPUs with AVX512-BF16. One VDPBF16PS multiplies 16 pairs of
// bfloat16 inputs by 16 pairs of weights and adds both products to 16 float32
// sums: a tile of up to 12 rows of X by one panel of 16 weight rows keeps 12
// accumulators in registers, loads the panel's next 16 pairs once and broadcasts
// each row's pair. The chain it computes is written out in packed_matmul.h and, as
// the reference, in tests/test_matmul_precision.cpp.
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "bf16_rounding.h"
#include "loom/cpu.h"
#include "packed_matmul.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define LOOM_HAS_DPBF16 1
#define LOOM_TARGET_DPBF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))
#else
#define LOOM_HAS_DPBF16 0
#endif

namespace loom::detail {

namespace {

constexpr int64_t kPanel = 16;       // weight rows per panel: one register of 16 lanes
constexpr int64_t kTileRows = 12;    // 12 accumulators, the panel's pairs and a broadcast
constexpr int64_t kBlockRows = 192;  // rows of X per work item, as the float32 kernel's

int64_t panel_count(int64_t n) { return (n + kPanel - 1) / kPanel; }
int64_t pair_count(int64_t k) { return (k + 1) / 2; }

#if LOOM_HAS_DPBF16
// R rows of X (as pairs) times one panel, all of its pairs; `columns` of the 16 stored.
template <int R>
LOOM_TARGET_DPBF16 inline void tile(int64_t pairs, const uint32_t* x, const uint32_t* panel, float* c, int64_t ldc,
                                    int64_t columns) {
  __m512 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  for (int64_t q = 0; q < pairs; ++q) {
    const __m512bh w = (__m512bh)_mm512_loadu_si512(panel + q * kPanel);
    for (int r = 0; r < R; ++r)
      acc[r] = _mm512_dpbf16_ps(acc[r], (__m512bh)_mm512_set1_epi32(static_cast<int>(x[r * pairs + q])), w);
  }
  const __mmask16 stored = static_cast<__mmask16>((1u << columns) - 1);
  for (int r = 0; r < R; ++r) _mm512_mask_storeu_ps(c + r * ldc, stored, acc[r]);
}

template <int R = kTileRows>
LOOM_TARGET_DPBF16 void rows_times_panel(int64_t m, int64_t pairs, const uint32_t* x, const uint32_t* panel, float* c,
                                         int64_t ldc, int64_t columns) {
  if constexpr (R > 0) {
    for (; m >= R; m -= R, x += R * pairs, c += R * ldc) tile<R>(pairs, x, panel, c, ldc, columns);
    if (m > 0) rows_times_panel<R - 1>(m, pairs, x, panel, c, ldc, columns);
  }
}
#endif

}  // namespace

bool packed_bf16_available() { return LOOM_HAS_DPBF16 && cpu_has_avx512_bf16() && avx512_enabled(); }

std::vector<uint32_t> pack_bf16_pairs(const float* w, int64_t n, int64_t k, int64_t ldw) {
  const int64_t pairs = pair_count(k);
  std::vector<uint32_t> packed(static_cast<size_t>(panel_count(n) * pairs * kPanel));
  auto bits = [](float value) { return static_cast<uint32_t>(bfloat16::round_to_bf16_bits(value)); };
#pragma omp parallel for schedule(static)
  for (int64_t panel = 0; panel < panel_count(n); ++panel)
    for (int64_t j = 0; j < kPanel; ++j) {
      const int64_t row = panel * kPanel + j;
      for (int64_t q = 0; q < pairs && row < n; ++q) {
        const float low = w[row * ldw + 2 * q], high = 2 * q + 1 < k ? w[row * ldw + 2 * q + 1] : 0.0f;
        packed[static_cast<size_t>((panel * pairs + q) * kPanel + j)] = bits(low) | bits(high) << 16;
      }
    }
  return packed;
}

// X's rows rounded to pairs once (all threads), then work items (block of rows,
// panel) as the float32 kernel's: every element summed the same way wherever it is.
void packed_matmul_bf16(int64_t m, const float* x, int64_t ldx, const PackedWeight& w, float* c, int64_t ldc,
                        const float* bias) {
#if LOOM_HAS_DPBF16
  const int64_t k = w.k, pairs = pair_count(k), panels = panel_count(w.n), blocks = (m + kBlockRows - 1) / kBlockRows;
  static thread_local std::vector<uint32_t> x_pairs;  // the calling thread's, reused by every product
  x_pairs.resize(static_cast<size_t>(m * pairs));
  uint32_t* const xp = x_pairs.data();
#pragma omp parallel
  {
#pragma omp for schedule(static)
    for (int64_t i = 0; i < m; ++i) {
      xp[i * pairs + pairs - 1] = 0;  // an odd k's last pair: high half 0
      round_rows_to_bf16(x + i * ldx, 1, k, ldx, reinterpret_cast<bfloat16*>(xp + i * pairs));
    }
#pragma omp for schedule(static)
    for (int64_t item = 0; item < blocks * panels; ++item) {
      const int64_t block = item / panels, panel = item % panels;
      const int64_t row = block * kBlockRows, rows = std::min(kBlockRows, m - row);
      const int64_t column = panel * kPanel, columns = std::min(kPanel, w.n - column);
      rows_times_panel(rows, pairs, xp + row * pairs, w.bf16_pairs.data() + panel * pairs * kPanel,
                       c + row * ldc + column, ldc, columns);
      if (bias) add_bias(c + row * ldc + column, ldc, rows, columns, bias + column);
    }
  }
#else
  (void)m, (void)x, (void)ldx, (void)w, (void)c, (void)ldc, (void)bias;
#endif
}

}  // namespace loom::detail
