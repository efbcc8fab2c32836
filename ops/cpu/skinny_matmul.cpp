// The skinny float32 product (skinny_matmul.h): tiles of 4 rows of X by 4 rows
// of W, their 16 accumulators of 16 lanes (one AVX-512 register each) and 8
// operands in AVX-512's 32 registers. Compiled with -ffp-contract=fast
// (ops/CMakeLists.txt), so `acc += x * w` is one fused multiply-add.
#include "skinny_matmul.h"

#include <cstring>

#include "loom/cpu.h"

namespace loom::detail {

namespace {

using Lanes = float __attribute__((vector_size(64)));  // 16 floats
constexpr int64_t kLanes = 16;

[[gnu::always_inline]] inline Lanes load(const float* p) {
  Lanes v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// The first `count` (< 16) floats at p, the other lanes zero: adding 0 * 0 to a
// lane leaves it as it was, so a short k sums like a padded one.
[[gnu::always_inline]] inline Lanes load_part(const float* p, int64_t count) {
  Lanes v = {};
  std::memcpy(&v, p, static_cast<size_t>(count) * sizeof(float));
  return v;
}

// The lane sums of 16 accumulators, each added in a fixed tree: lanes l and
// l + 8, then l and l + 4, l + 2, l + 1. Each level adds pairs of vectors, so 16
// sums take 15 additions (and 30 shuffles), not 240 scalar ones.
template <int... I>
[[gnu::always_inline]] inline Lanes pick(Lanes a, Lanes b) {
  return __builtin_shufflevector(a, b, I...);
}
[[gnu::always_inline]] inline Lanes lane_sums(const Lanes (&v)[16]) {
  Lanes halves[8], quarters[4], eighths[2];
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

// One tile: R rows of X times C rows of W, all of k.
template <int R, int C>
[[gnu::always_inline]] inline void tile(int64_t k, const float* x, int64_t ldx, const float* w, int64_t ldw, float* c,
                                        int64_t ldc) {
  Lanes acc[R][C] = {};
  Lanes xs[R], ws[C];
  const int64_t whole = k / kLanes * kLanes;
  for (int64_t p = 0; p < whole; p += kLanes) {
    for (int r = 0; r < R; ++r) xs[r] = load(x + r * ldx + p);
    for (int j = 0; j < C; ++j) ws[j] = load(w + j * ldw + p);
    for (int r = 0; r < R; ++r)
      for (int j = 0; j < C; ++j) acc[r][j] += xs[r] * ws[j];
  }
  if (whole < k) {
    for (int r = 0; r < R; ++r) xs[r] = load_part(x + r * ldx + whole, k - whole);
    for (int j = 0; j < C; ++j) ws[j] = load_part(w + j * ldw + whole, k - whole);
    for (int r = 0; r < R; ++r)
      for (int j = 0; j < C; ++j) acc[r][j] += xs[r] * ws[j];
  }
  static_assert(R * C <= 16);
  Lanes all[16] = {};  // unused ones stay zero
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < C; ++j) all[r * C + j] = acc[r][j];
  float sums[16];
  const Lanes summed = lane_sums(all);
  std::memcpy(sums, &summed, sizeof summed);
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < C; ++j) c[r * ldc + j] = sums[r * C + j];
}

// Every tile: C weight rows at a time (each read from memory once), against all
// rows of X (R at a time, then one at a time), then the last n % C weight rows.
template <int R, int C>
[[gnu::always_inline]] inline void all_tiles(int64_t m, int64_t n, int64_t k, const float* x, int64_t ldx,
                                             const float* w, int64_t ldw, float* c, int64_t ldc) {
  const int64_t full_rows = m / R * R;
  int64_t j = 0;
  for (; j + C <= n; j += C) {
    int64_t i = 0;
    for (; i < full_rows; i += R) tile<R, C>(k, x + i * ldx, ldx, w + j * ldw, ldw, c + i * ldc + j, ldc);
    for (; i < m; ++i) tile<1, C>(k, x + i * ldx, ldx, w + j * ldw, ldw, c + i * ldc + j, ldc);
  }
  for (; j < n; ++j) {
    int64_t i = 0;
    for (; i < full_rows; i += R) tile<R, 1>(k, x + i * ldx, ldx, w + j * ldw, ldw, c + i * ldc + j, ldc);
    for (; i < m; ++i) tile<1, 1>(k, x + i * ldx, ldx, w + j * ldw, ldw, c + i * ldc + j, ldc);
  }
}

#if LOOM_HAS_AVX512_TWIN
LOOM_TARGET_AVX512 void skinny_avx512(int64_t m, int64_t n, int64_t k, const float* x, int64_t ldx, const float* w,
                                      int64_t ldw, float* c, int64_t ldc) {
  all_tiles<4, 4>(m, n, k, x, ldx, w, ldw, c, ldc);  // 16 accumulators + 8 operands of 32 registers
}
#endif

}  // namespace

bool skinny_matmul_available() { return LOOM_HAS_AVX512_TWIN && avx512_enabled(); }

void skinny_matmul(int64_t m, int64_t n, int64_t k, const float* x, int64_t ldx, const float* w, int64_t ldw, float* c,
                   int64_t ldc) {
#if LOOM_HAS_AVX512_TWIN
  skinny_avx512(m, n, k, x, ldx, w, ldw, c, ldc);
#endif
}

}  // namespace loom::detail
