// Products against a weight's bfloat16 packed copy (packed_matmul.h): bf16
// decoding on CPUs with AVX512-BF16. One VDPBF16PS multiplies 16 pairs of
// bfloat16 inputs by 16 pairs of weights and adds both products to 16 float32
// sums: a tile of up to 6 rows of X by two panels of 16 weight rows keeps 12
// accumulators in registers, loads each panel's next 16 pairs once and broadcasts
// each row's pair once for both panels (2 loads and 6 broadcasts feed 12
// VDPBF16PS; one panel per tile needed 13 for 12, and ran 10-30% slower on most of
// decoding's shapes in a microbenchmark on Zen 4, docs/benchmarks.md). The chain it computes is written out in
// packed_matmul.h and, as the reference, in tests/test_matmul_precision.cpp.
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
constexpr int64_t kTilePanels = 2;   // panels sharing each broadcast
constexpr int64_t kTileRows = 6;     // 6 x 2 accumulators, the two panels' pairs and a broadcast
constexpr int64_t kBlockRows = 192;  // rows of X per work item, as the float32 kernel's

int64_t panel_count(int64_t n) { return (n + kPanel - 1) / kPanel; }
int64_t pair_count(int64_t k) { return (k + 1) / 2; }

#if LOOM_HAS_DPBF16
// R rows of X (as pairs) times P consecutive panels, all of their pairs; `columns`
// of the P x 16 stored (the last panel may be partial).
template <int R, int P>
LOOM_TARGET_DPBF16 inline void tile(int64_t pairs, const uint32_t* x, const uint32_t* panels, float* c, int64_t ldc,
                                    int64_t columns) {
  __m512 acc[R][P];
  for (int r = 0; r < R; ++r)
    for (int p = 0; p < P; ++p) acc[r][p] = _mm512_setzero_ps();
  for (int64_t q = 0; q < pairs; ++q) {
    __m512bh w[P];
    for (int p = 0; p < P; ++p) w[p] = (__m512bh)_mm512_loadu_si512(panels + (p * pairs + q) * kPanel);
    for (int r = 0; r < R; ++r) {
      const __m512bh pair = (__m512bh)_mm512_set1_epi32(static_cast<int>(x[r * pairs + q]));
      for (int p = 0; p < P; ++p) acc[r][p] = _mm512_dpbf16_ps(acc[r][p], pair, w[p]);
    }
  }
  for (int p = 0; p < P; ++p) {
    const int64_t stored_columns = std::min(kPanel, columns - p * kPanel);
    const __mmask16 stored = static_cast<__mmask16>((1u << stored_columns) - 1);
    for (int r = 0; r < R; ++r) _mm512_mask_storeu_ps(c + r * ldc + p * kPanel, stored, acc[r][p]);
  }
}

template <int P, int R = kTileRows>
LOOM_TARGET_DPBF16 void rows_times_panels(int64_t m, int64_t pairs, const uint32_t* x, const uint32_t* panels, float* c,
                                          int64_t ldc, int64_t columns) {
  if constexpr (R > 0) {
    for (; m >= R; m -= R, x += R * pairs, c += R * ldc) tile<R, P>(pairs, x, panels, c, ldc, columns);
    if (m > 0) rows_times_panels<P, R - 1>(m, pairs, x, panels, c, ldc, columns);
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
// two panels), as the float32 kernel's (block, panel): every element summed the same way wherever it is.
void packed_matmul_bf16(int64_t m, const float* x, int64_t ldx, const PackedWeight& w, float* c, int64_t ldc,
                        const float* bias) {
#if LOOM_HAS_DPBF16
  const int64_t k = w.k, pairs = pair_count(k), blocks = (m + kBlockRows - 1) / kBlockRows;
  const int64_t groups = (panel_count(w.n) + kTilePanels - 1) / kTilePanels;
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
    for (int64_t item = 0; item < blocks * groups; ++item) {
      const int64_t block = item / groups, group = item % groups;
      const int64_t row = block * kBlockRows, rows = std::min(kBlockRows, m - row);
      const int64_t column = group * kTilePanels * kPanel, columns = std::min(kTilePanels * kPanel, w.n - column);
      const uint32_t* const group_panels = w.bf16_pairs.data() + group * kTilePanels * pairs * kPanel;
      float* const c_block = c + row * ldc + column;
      if (columns > kPanel)
        rows_times_panels<kTilePanels>(rows, pairs, xp + row * pairs, group_panels, c_block, ldc, columns);
      else  // the last group, one panel
        rows_times_panels<1>(rows, pairs, xp + row * pairs, group_panels, c_block, ldc, columns);
      if (bias) add_bias(c_block, ldc, rows, columns, bias + column);
    }
  }
#else
  (void)m, (void)x, (void)ldx, (void)w, (void)c, (void)ldc, (void)bias;
#endif
}

}  // namespace loom::detail
