// Products against a packed weight (packed_matmul.h): packing, and the tiles. Their
// reference is the chain of fused multiply-adds the header states, which
// tests/test_matmul_precision.cpp writes out and compares bit for bit.
#include "packed_matmul.h"

#include <omp.h>
#if defined(__AVX__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <cmath>
#include <cstring>

namespace loom::detail {

namespace {

using Lanes8 = float __attribute__((vector_size(32)));  // an AVX2 register

constexpr int64_t kPanel = 16;       // weight rows per panel: two registers of 8 lanes
constexpr int64_t kTileRows = 6;     // 6 x 2 accumulators, 2 panel vectors and a broadcast: 15 of 16 registers
constexpr int64_t kBlockRows = 192;  // rows of X per work item: 192 x 1024 floats (768 KB) at most, near L2

int64_t panel_count(int64_t n) { return (n + kPanel - 1) / kPanel; }

[[gnu::always_inline]] inline Lanes8 load(const float* p) {
  Lanes8 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// Stores a register's 8 lanes.
[[gnu::always_inline]] inline void store(float* p, Lanes8 v) {
#if defined(__AVX__)
  _mm256_storeu_ps(p, v);
#else
  std::memcpy(p, &v, sizeof v);
#endif
}

// acc + x * w in each lane, rounded once: the reference's std::fma. Written out,
// because a Debug build does not contract `acc += x * w` whatever -ffp-contract says.
[[gnu::always_inline]] inline Lanes8 fma_lanes(float x, Lanes8 w, Lanes8 acc) {
#if defined(__FMA__)
  return _mm256_fmadd_ps(_mm256_set1_ps(x), w, acc);
#else
  for (int lane = 0; lane < 8; ++lane) acc[lane] = std::fma(x, w[lane], acc[lane]);
  return acc;
#endif
}

// R rows of X times one panel, all of k. A whole panel stores its 16 columns
// directly; the last, partial one goes through a buffer (a store of `columns`
// floats straight from the accumulators would make g++ keep them in memory).
template <int R, bool Whole>
[[gnu::always_inline]] inline void tile(int64_t k, const float* x, int64_t ldx, const float* panel, const float* next,
                                        float* c, int64_t ldc, int64_t columns) {
  Lanes8 low[R] = {}, high[R] = {};
  const float* rows[R];
  for (int r = 0; r < R; ++r) rows[r] = x + r * ldx;
#pragma GCC unroll 4
  for (int64_t p = 0; p < k; ++p) {
    const Lanes8 w_low = load(panel + p * kPanel), w_high = load(panel + p * kPanel + 8);
    // The next panel is fetched toward L2 while this one is multiplied, a line (16
    // floats) per p: the generator's panels come from memory, and a panel's first
    // tile would wait for them (`bench/decode.sh`).
    __builtin_prefetch(next + p * kPanel, 0, 2);
    for (int r = 0; r < R; ++r) {
      const float xp = rows[r][p];
      low[r] = fma_lanes(xp, w_low, low[r]);
      high[r] = fma_lanes(xp, w_high, high[r]);
    }
  }
  // Unrolled, with stores straight from the registers: a loop of memcpy from the
  // accumulators' addresses makes g++ keep them in a stack array, zeroed by `rep stos`
  // before every tile and copied out after it.
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    if constexpr (Whole) {
      store(c + r * ldc, low[r]);
      store(c + r * ldc + 8, high[r]);
    } else {
      float row[kPanel];
      store(row, low[r]);
      store(row + 8, high[r]);
      std::memcpy(c + r * ldc, row, static_cast<size_t>(columns) * sizeof(float));
    }
  }
}

// Rows [0, m) of X (m <= kBlockRows) times one panel: 6 rows at a time, then the rest.
template <bool Whole>
void rows_times_panel(int64_t m, int64_t k, const float* x, int64_t ldx, const float* panel, const float* next,
                      float* c, int64_t ldc, int64_t columns) {
  int64_t i = 0;
  for (; i + kTileRows <= m; i += kTileRows)
    tile<kTileRows, Whole>(k, x + i * ldx, ldx, panel, next, c + i * ldc, ldc, columns);
  const float* xi = x + i * ldx;
  float* ci = c + i * ldc;
  switch (m - i) {
    case 5: return tile<5, Whole>(k, xi, ldx, panel, next, ci, ldc, columns);
    case 4: return tile<4, Whole>(k, xi, ldx, panel, next, ci, ldc, columns);
    case 3: return tile<3, Whole>(k, xi, ldx, panel, next, ci, ldc, columns);
    case 2: return tile<2, Whole>(k, xi, ldx, panel, next, ci, ldc, columns);
    case 1: return tile<1, Whole>(k, xi, ldx, panel, next, ci, ldc, columns);
    default: return;
  }
}

}  // namespace

PackedWeight pack_weight(const float* w, int64_t n, int64_t k, int64_t ldw, bool with_bf16) {
  if (with_bf16 && packed_bf16_available()) return {.n = n, .k = k, .bf16_pairs = pack_bf16_pairs(w, n, k, ldw)};
  PackedWeight packed{.n = n, .k = k, .panels = std::vector<float>(static_cast<size_t>(panel_count(n) * k * kPanel))};
  float* const out = packed.panels.data();
#pragma omp parallel for schedule(static)
  for (int64_t panel = 0; panel < panel_count(n); ++panel) {
    const int64_t first = panel * kPanel, columns = std::min(kPanel, n - first);
    float* dst = out + panel * k * kPanel;
    for (int64_t p = 0; p < k; ++p)
      for (int64_t j = 0; j < kPanel; ++j) dst[p * kPanel + j] = j < columns ? w[(first + j) * ldw + p] : 0.0f;
  }
  return packed;
}

// Work items are (block of rows, panel), each a single-threaded loop of tiles; every
// element is summed the same way in whichever item and thread computes it.
void packed_matmul(int64_t m, const float* x, int64_t ldx, const PackedWeight& w, float* c, int64_t ldc,
                   const float* bias) {
  const int64_t panels = panel_count(w.n), blocks = (m + kBlockRows - 1) / kBlockRows;
#pragma omp parallel for schedule(static)
  for (int64_t item = 0; item < blocks * panels; ++item) {
    const int64_t block = item / panels, panel = item % panels;
    const int64_t row = block * kBlockRows, rows = std::min(kBlockRows, m - row);
    const int64_t column = panel * kPanel, columns = std::min(kPanel, w.n - column);
    const float* weights = w.panels.data() + panel * w.k * kPanel;
    const float* next = panel + 1 < panels ? weights + w.k * kPanel : weights;  // prefetched in the tiles
    if (columns == kPanel)
      rows_times_panel<true>(rows, w.k, x + row * ldx, ldx, weights, next, c + row * ldc + column, ldc, columns);
    else
      rows_times_panel<false>(rows, w.k, x + row * ldx, ldx, weights, next, c + row * ldc + column, ldc, columns);
    if (bias) add_bias(c + row * ldc + column, ldc, rows, columns, bias + column);
  }
}

}  // namespace loom::detail
