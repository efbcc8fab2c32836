// The skinny float32 products (skinny_matmul.h). X @ W^T: tiles of R rows of X
// by C rows of W, their R x C accumulators and R + C operands in the vector
// registers (AVX-512: 4 x 4 of 16 lanes in 32 registers; AVX2: 3 x 4 of 8 lanes
// in 16, the next operand loaded as it is used). Compiled with -ffp-contract=fast
// (ops/CMakeLists.txt), so `acc += x * w` is one fused multiply-add.
#include "skinny_matmul.h"

#include <algorithm>
#include <cstring>

#include "loom/cpu.h"

namespace loom::detail {

namespace {

using Lanes16 = float __attribute__((vector_size(64)));  // an AVX-512 register
using Lanes8 = float __attribute__((vector_size(32)));   // an AVX2 register

template <typename V>
constexpr int64_t kLanes = sizeof(V) / sizeof(float);

template <typename V>
[[gnu::always_inline]] inline V load(const float* p) {
  V v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// The first `count` (< lanes) floats at p, the other lanes zero: adding 0 * 0 to
// a lane leaves it as it was, so a short k sums like a padded one.
template <typename V>
[[gnu::always_inline]] inline V load_part(const float* p, int64_t count) {
  V v = {};
  std::memcpy(&v, p, static_cast<size_t>(count) * sizeof(float));
  return v;
}

// The lane sums of as many accumulators as lanes, each added in a fixed tree:
// lanes l and l + L/2, then l and l + L/4, ..., l + 1. Each level adds pairs of
// vectors, so 16 sums take 15 additions (and 30 shuffles), not 240 scalar ones.
template <int... I, typename V>
[[gnu::always_inline]] inline V pick(V a, V b) {
  return __builtin_shufflevector(a, b, I...);
}
[[gnu::always_inline]] inline Lanes16 lane_sums(const Lanes16 (&v)[16]) {
  Lanes16 halves[8], quarters[4], eighths[2];
  for (int i = 0; i < 8; ++i)  // lanes 0-7: v[2i]'s l + (l + 8); lanes 8-15: v[2i + 1]'s
    halves[i] = pick<0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23>(v[2 * i], v[2 * i + 1]) +
                pick<8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31>(v[2 * i], v[2 * i + 1]);
  for (int i = 0; i < 4; ++i)  // four lanes each of v[4i .. 4i + 3]
    quarters[i] = pick<0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27>(halves[2 * i], halves[2 * i + 1]) +
                  pick<4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 28, 29, 30, 31>(halves[2 * i], halves[2 * i + 1]);
  for (int i = 0; i < 2; ++i)  // two lanes each of v[8i .. 8i + 7]
    eighths[i] = pick<0, 1, 4, 5, 8, 9, 12, 13, 16, 17, 20, 21, 24, 25, 28, 29>(quarters[2 * i], quarters[2 * i + 1]) +
                 pick<2, 3, 6, 7, 10, 11, 14, 15, 18, 19, 22, 23, 26, 27, 30, 31>(quarters[2 * i], quarters[2 * i + 1]);
  return pick<0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30>(eighths[0], eighths[1]) +
         pick<1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31>(eighths[0], eighths[1]);
}
[[gnu::always_inline]] inline Lanes8 lane_sums(const Lanes8 (&v)[8]) {
  Lanes8 halves[4], quarters[2];
  for (int i = 0; i < 4; ++i)  // lanes 0-3: v[2i]'s l + (l + 4); lanes 4-7: v[2i + 1]'s
    halves[i] = pick<0, 1, 2, 3, 8, 9, 10, 11>(v[2 * i], v[2 * i + 1]) +
                pick<4, 5, 6, 7, 12, 13, 14, 15>(v[2 * i], v[2 * i + 1]);
  for (int i = 0; i < 2; ++i)  // two lanes each of v[4i .. 4i + 3]
    quarters[i] = pick<0, 1, 4, 5, 8, 9, 12, 13>(halves[2 * i], halves[2 * i + 1]) +
                  pick<2, 3, 6, 7, 10, 11, 14, 15>(halves[2 * i], halves[2 * i + 1]);
  return pick<0, 2, 4, 6, 8, 10, 12, 14>(quarters[0], quarters[1]) +
         pick<1, 3, 5, 7, 9, 11, 13, 15>(quarters[0], quarters[1]);
}

// One tile: R rows of X times C rows of W, all of k.
template <typename V, int R, int C>
[[gnu::always_inline]] inline void tile(int64_t k, const float* x, int64_t ldx, const float* w, int64_t ldw, float* c,
                                        int64_t ldc) {
  constexpr int64_t L = kLanes<V>;
  V acc[R][C];  // zeroed one by one: `= {}` made g++ zero a stack copy with `rep stos` before every tile
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < C; ++j) acc[r][j] = V{};
  V xs[R];
  const int64_t whole = k / L * L;
  for (int64_t p = 0; p < whole; p += L) {
    for (int r = 0; r < R; ++r) xs[r] = load<V>(x + r * ldx + p);
    for (int j = 0; j < C; ++j) {
      const V wj = load<V>(w + j * ldw + p);
      for (int r = 0; r < R; ++r) acc[r][j] += xs[r] * wj;
    }
  }
  if (whole < k) {
    for (int r = 0; r < R; ++r) xs[r] = load_part<V>(x + r * ldx + whole, k - whole);
    for (int j = 0; j < C; ++j) {
      const V wj = load_part<V>(w + j * ldw + whole, k - whole);
      for (int r = 0; r < R; ++r) acc[r][j] += xs[r] * wj;
    }
  }
  constexpr int kGroups = (R * C + L - 1) / L;  // lane_sums of L accumulators at a time
  V all[kGroups][L];                            // each entry assigned once, unused ones zero (not zeroed first, as acc)
  for (int i = 0; i < kGroups * L; ++i) all[i / L][i % L] = i < R * C ? acc[i / C][i % C] : V{};
  float sums[kGroups * L];
  for (int g = 0; g < kGroups; ++g) {
    const V summed = lane_sums(all[g]);
    std::memcpy(sums + g * L, &summed, sizeof summed);
  }
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < C; ++j) c[r * ldc + j] = sums[r * C + j];
}

// Every tile: C weight rows at a time (each read from memory once), against all
// rows of X (R at a time, then one at a time), then the last n % C weight rows.
template <typename V, int R, int C>
[[gnu::always_inline]] inline void all_tiles(int64_t m, int64_t n, int64_t k, const float* x, int64_t ldx,
                                             const float* w, int64_t ldw, float* c, int64_t ldc) {
  const int64_t full_rows = m / R * R;
  int64_t j = 0;
  for (; j + C <= n; j += C) {
    int64_t i = 0;
    for (; i < full_rows; i += R) tile<V, R, C>(k, x + i * ldx, ldx, w + j * ldw, ldw, c + i * ldc + j, ldc);
    for (; i < m; ++i) tile<V, 1, C>(k, x + i * ldx, ldx, w + j * ldw, ldw, c + i * ldc + j, ldc);
  }
  for (; j < n; ++j) {
    int64_t i = 0;
    for (; i < full_rows; i += R) tile<V, R, 1>(k, x + i * ldx, ldx, w + j * ldw, ldw, c + i * ldc + j, ldc);
    for (; i < m; ++i) tile<V, 1, 1>(k, x + i * ldx, ldx, w + j * ldw, ldw, c + i * ldc + j, ldc);
  }
}

#if LOOM_HAS_AVX512_TWIN
LOOM_TARGET_AVX512 void skinny_avx512(int64_t m, int64_t n, int64_t k, const float* x, int64_t ldx, const float* w,
                                      int64_t ldw, float* c, int64_t ldc) {
  all_tiles<Lanes16, 4, 4>(m, n, k, x, ldx, w, ldw, c, ldc);  // 16 accumulators + 8 operands of 32 registers
}
#endif

// c[0, count) = sum over p < k of a[p] * b[p * ldb, + count), count <= Vectors x 8,
// in Vectors accumulators of AVX2's 8 lanes: each element's sum runs over p in order.
template <int Vectors>
[[gnu::always_inline]] inline void row_times_columns(int64_t k, const float* a, const float* b, int64_t ldb, float* c,
                                                     int64_t count) {
  constexpr int64_t L = kLanes<Lanes8>;
  Lanes8 acc[Vectors];
  for (int v = 0; v < Vectors; ++v) acc[v] = Lanes8{};  // (as tile's accumulators: no stack copy zeroed)
  for (int64_t p = 0; p < k; ++p)
    for (int v = 0; v < Vectors; ++v)
      acc[v] += a[p] * ((v + 1) * L <= count ? load<Lanes8>(b + p * ldb + v * L)
                                             : load_part<Lanes8>(b + p * ldb + v * L, count - v * L));
  for (int v = 0; v < Vectors; ++v)  // the vectors' lanes, in order: whole vectors, then the part of the last
    if ((v + 1) * L <= count)
      std::memcpy(c + v * L, &acc[v], sizeof acc[v]);
    else if (v * L < count)
      std::memcpy(c + v * L, &acc[v], static_cast<size_t>(count - v * L) * sizeof(float));
}

}  // namespace

bool skinny_matmul_available() { return LOOM_HAS_AVX512_TWIN && avx512_enabled(); }

void skinny_matmul(int64_t m, int64_t n, int64_t k, const float* x, int64_t ldx, const float* w, int64_t ldw, float* c,
                   int64_t ldc) {
#if LOOM_HAS_AVX512_TWIN
  skinny_avx512(m, n, k, x, ldx, w, ldw, c, ldc);
#endif
}

void tiny_matmul_transposed(int64_t m, int64_t n, int64_t k, const float* x, int64_t ldx, const float* w, int64_t ldw,
                            float* c, int64_t ldc) {
  all_tiles<Lanes8, 3, 4>(m, n, k, x, ldx, w, ldw, c, ldc);  // 12 accumulators + 3 operands + 1 of 16 registers
}

void tiny_matmul(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
                 int64_t ldc) {
  constexpr int64_t kColumns = 8 * kLanes<Lanes8>;  // 8 accumulators of 16 registers
  for (int64_t i = 0; i < m; ++i) {
    int64_t j = 0;
    for (; j + kColumns <= n; j += kColumns)
      row_times_columns<8>(k, a + i * lda, b + j, ldb, c + i * ldc + j, kColumns);
    for (; j < n; j += kLanes<Lanes8>)
      row_times_columns<1>(k, a + i * lda, b + j, ldb, c + i * ldc + j, std::min(kLanes<Lanes8>, n - j));
  }
}

}  // namespace loom::detail
