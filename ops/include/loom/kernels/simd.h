#pragma once
// Eight float32 lanes in one AVX2 register, written with GCC/Clang vector
// extensions: +, -, *, / and comparisons act lane by lane (a comparison gives
// an i32x8 of -1/0), so a vector kernel reads like its scalar loop. For the
// loops the auto-vectorizer handles badly: rows shorter than its vector loop
// (attention rows of 24) and byte masks mixed with floats.
//
// The lane helpers (splat, select, floor_lanes, fma_lanes, ...) also have
// float overloads, so one function template (exp_approx in vec_math.h) serves
// a scalar loop under `#pragma omp simd` and an f32x8 kernel alike. Written
// with explicit fmas (no product left for the compiler to contract or not),
// both instantiations give the same bits.
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#if !defined(__CUDA_ARCH__)
#include <immintrin.h>
#endif

#include "loom/hostdevice.h"

namespace loom::kernels {

// ---- scalar overloads (host and device) ----
template <typename F>
LOOM_HD F splat(float v) {
  return v;
}
LOOM_HD float select(bool mask, float a, float b) { return mask ? a : b; }
LOOM_HD float floor_lanes(float x) { return std::floor(x); }
LOOM_HD float fma_lanes(float a, float b, float c) { return std::fma(a, b, c); }
LOOM_HD int32_t to_int_lanes(float x) { return static_cast<int32_t>(x); }
LOOM_HD float float_from_bits(int32_t bits) { return std::bit_cast<float>(bits); }
LOOM_HD int32_t bits_of_float(float x) { return std::bit_cast<int32_t>(x); }
LOOM_HD float to_float_lanes(int32_t i) { return static_cast<float>(i); }

#if !defined(__CUDA_ARCH__)
using f32x8 = float __attribute__((vector_size(32)));
using i32x8 = int32_t __attribute__((vector_size(32)));
inline constexpr int64_t kF32Lanes = 8;

template <>
inline f32x8 splat<f32x8>(float v) {
  return f32x8{} + v;
}
inline f32x8 select(i32x8 mask, f32x8 a, f32x8 b) { return mask ? a : b; }
inline f32x8 floor_lanes(f32x8 x) { return __builtin_ia32_roundps256(x, 1); }  // 1: round toward -inf
inline f32x8 fma_lanes(f32x8 a, f32x8 b, f32x8 c) { return _mm256_fmadd_ps(a, b, c); }
inline i32x8 to_int_lanes(f32x8 x) { return __builtin_convertvector(x, i32x8); }
inline f32x8 float_from_bits(i32x8 bits) { return std::bit_cast<f32x8>(bits); }
inline i32x8 bits_of_float(f32x8 x) { return std::bit_cast<i32x8>(x); }
inline f32x8 to_float_lanes(i32x8 i) { return __builtin_convertvector(i, f32x8); }

inline f32x8 max_lanes(f32x8 a, f32x8 b) { return a > b ? a : b; }

// Lanes 0..width-1 set, the rest clear (width <= 8): a row's ragged end.
inline i32x8 first_lanes(int64_t width) { return i32x8{0, 1, 2, 3, 4, 5, 6, 7} < static_cast<int32_t>(width); }
// p[0, width) into lanes 0..width-1, `fill` in the rest, never touching memory
// past p + width (AVX2 masked loads and stores).
inline f32x8 load_lanes(const float* p, int64_t width = kF32Lanes, float fill = 0.0f) {
  if (width == kF32Lanes) return _mm256_loadu_ps(p);
  const i32x8 in_row = first_lanes(width);
  return select(in_row, _mm256_maskload_ps(p, __m256i(in_row)), splat<f32x8>(fill));
}
inline void store_lanes(float* p, f32x8 v, int64_t width = kF32Lanes) {
  if (width == kF32Lanes)
    _mm256_storeu_ps(p, v);
  else
    _mm256_maskstore_ps(p, __m256i(first_lanes(width)), v);
}
// Bytes p[0, width) widened to 32-bit lanes (0 past width): bool masks.
inline i32x8 load_byte_lanes(const uint8_t* p, int64_t width = kF32Lanes) {
  uint64_t bytes = 0;
  if (width == kF32Lanes)
    std::memcpy(&bytes, p, sizeof bytes);
  else
    for (int64_t l = 0; l < width; ++l) bytes |= uint64_t{p[l]} << (8 * l);
  return i32x8(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128(static_cast<int64_t>(bytes))));
}

// Sums and maxima across the lanes, in a fixed pairwise order (same bits every time).
inline float add_across(f32x8 v) {
  using f32x4 = float __attribute__((vector_size(16)));
  f32x4 q = __builtin_shufflevector(v, v, 0, 1, 2, 3) + __builtin_shufflevector(v, v, 4, 5, 6, 7);
  q = q + __builtin_shufflevector(q, q, 2, 3, 0, 1);
  return q[0] + q[1];
}
// Lane i = the sum across v[i]'s lanes, for 8 vectors at once (three rounds of
// pairwise adds, no scalar round trip), in the fixed order ((0+1)+(2+3))+((4+5)+(6+7)).
inline f32x8 add_across_each(const f32x8 (&v)[8]) {
  const __m256 u0 = _mm256_hadd_ps(_mm256_hadd_ps(v[0], v[1]), _mm256_hadd_ps(v[2], v[3]));
  const __m256 u1 = _mm256_hadd_ps(_mm256_hadd_ps(v[4], v[5]), _mm256_hadd_ps(v[6], v[7]));
  // u0 holds v[0..3]'s sums of lanes 0-3 in its low half and of lanes 4-7 in its high half; u1 the same for v[4..7].
  return _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20), _mm256_permute2f128_ps(u0, u1, 0x31));
}
inline float max_across(f32x8 v) {
  using f32x4 = float __attribute__((vector_size(16)));
  f32x4 a = __builtin_shufflevector(v, v, 0, 1, 2, 3), b = __builtin_shufflevector(v, v, 4, 5, 6, 7);
  f32x4 q = a > b ? a : b;
  f32x4 s = __builtin_shufflevector(q, q, 2, 3, 0, 1);
  q = q > s ? q : s;
  return q[0] > q[1] ? q[0] : q[1];
}
#endif

}  // namespace loom::kernels
