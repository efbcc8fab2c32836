#pragma once
// Philox words for runs of consecutive blocks (4 words per block, in element order:
// word 4*b + lane of block first + b), the CPU's fast path for random masks. With
// AVX2 eight blocks run in the lanes of one register, and philox_batch32 keeps four
// such registers in flight at once: one Philox round is a chain of dependent
// multiplies, so a lone batch waits on latency (32 blocks interleaved ran 2.4x
// faster than 8 at a time on a Zen 3, measured). The result is bit-identical to
// calling philox_block() per block (test_random checks it), which remains the
// definition.
#include <cstdint>

#include "loom/cpu.h"
#include "loom/philox.h"

#if defined(__AVX2__) && !defined(__CUDACC__)
#include <immintrin.h>
#endif

namespace loom {

inline constexpr int kPhiloxBatchBlocks = 8;   // one AVX2 batch
inline constexpr int kPhiloxChunkBlocks = 32;  // philox_batch32

#if defined(__AVX2__) && !defined(__CUDACC__)
namespace philox_detail {
// Counter words 0 and 1 (the block index, low and high) of N consecutive blocks.
template <int N>
inline void block_counters(uint64_t first_block, uint32_t* lo, uint32_t* hi) {
  for (int b = 0; b < N; ++b) {
    lo[b] = static_cast<uint32_t>(first_block + b);
    hi[b] = static_cast<uint32_t>((first_block + b) >> 32);
  }
}

// Counter words 0 and 1 of eight consecutive blocks from first_block, in vector
// lanes: the low word plus the lane, and the high word plus its carry (a lane whose
// low word wrapped past 2^32 compares below the first, unsigned).
inline void block_counters8(uint64_t first_block, __m256i* lo, __m256i* hi) {
  const __m256i sign = _mm256_set1_epi32(static_cast<int32_t>(0x80000000u));
  const __m256i first_lo = _mm256_set1_epi32(static_cast<int32_t>(static_cast<uint32_t>(first_block)));
  *lo = _mm256_add_epi32(first_lo, _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  const __m256i carry = _mm256_cmpgt_epi32(_mm256_xor_si256(first_lo, sign), _mm256_xor_si256(*lo, sign));  // -1 or 0
  *hi = _mm256_sub_epi32(_mm256_set1_epi32(static_cast<int32_t>(static_cast<uint32_t>(first_block >> 32))), carry);
}

// lo and hi halves of the 32x32->64 products of each lane of a with m.
inline void mulhilo8(__m256i a, __m256i m, __m256i* lo, __m256i* hi) {
  *lo = _mm256_mullo_epi32(a, m);
  __m256i even = _mm256_mul_epu32(a, m);                             // lanes 0,2,4,6 as 64-bit
  __m256i odd = _mm256_mul_epu32(_mm256_srli_epi64(a, 32), m);       // lanes 1,3,5,7
  *hi = _mm256_blend_epi32(_mm256_srli_epi64(even, 32), odd, 0xAA);  // high words back in place
}
}  // namespace philox_detail

// Batches x 8 consecutive blocks from first_block, the batches' rounds interleaved.
template <int Batches>
inline void philox_batches(uint64_t seed, uint64_t offset, uint64_t first_block, uint32_t* words) {
  using namespace philox_detail;
  // Counter words: block index (low, high), then the offset (low, high).
  __m256i c0[Batches], c1[Batches], c2[Batches], c3[Batches];
  for (int batch = 0; batch < Batches; ++batch) {
    block_counters8(first_block + 8 * batch, &c0[batch], &c1[batch]);
    c2[batch] = _mm256_set1_epi32(static_cast<int32_t>(static_cast<uint32_t>(offset)));
    c3[batch] = _mm256_set1_epi32(static_cast<int32_t>(static_cast<uint32_t>(offset >> 32)));
  }
  const __m256i m0 = _mm256_set1_epi32(static_cast<int32_t>(0xD2511F53u));
  const __m256i m1 = _mm256_set1_epi32(static_cast<int32_t>(0xCD9E8D57u));
  uint32_t key0 = static_cast<uint32_t>(seed), key1 = static_cast<uint32_t>(seed >> 32);
  for (int round = 0; round < 10; ++round) {
    __m256i k0 = _mm256_set1_epi32(static_cast<int32_t>(key0)), k1 = _mm256_set1_epi32(static_cast<int32_t>(key1));
    for (int batch = 0; batch < Batches; ++batch) {
      __m256i lo0, hi0, lo1, hi1;
      mulhilo8(c0[batch], m0, &lo0, &hi0);
      mulhilo8(c2[batch], m1, &lo1, &hi1);
      c0[batch] = _mm256_xor_si256(_mm256_xor_si256(hi1, c1[batch]), k0);
      c1[batch] = lo1;
      c2[batch] = _mm256_xor_si256(_mm256_xor_si256(hi0, c3[batch]), k1);
      c3[batch] = lo0;
    }
    key0 += 0x9E3779B9u;
    key1 += 0xBB67AE85u;
  }
  // Transpose each batch's four 8-lane vectors (word 0..3 of blocks 0..7) into element order.
  for (int batch = 0; batch < Batches; ++batch) {
    __m256i t0 = _mm256_unpacklo_epi32(c0[batch], c1[batch]), t1 = _mm256_unpackhi_epi32(c0[batch], c1[batch]);
    __m256i t2 = _mm256_unpacklo_epi32(c2[batch], c3[batch]), t3 = _mm256_unpackhi_epi32(c2[batch], c3[batch]);
    __m256i u0 = _mm256_unpacklo_epi64(t0, t2), u1 = _mm256_unpackhi_epi64(t0, t2);
    __m256i u2 = _mm256_unpacklo_epi64(t1, t3), u3 = _mm256_unpackhi_epi64(t1, t3);
    auto* out = reinterpret_cast<__m256i*>(words + 32 * batch);
    _mm256_storeu_si256(out + 0, _mm256_permute2x128_si256(u0, u1, 0x20));
    _mm256_storeu_si256(out + 1, _mm256_permute2x128_si256(u2, u3, 0x20));
    _mm256_storeu_si256(out + 2, _mm256_permute2x128_si256(u0, u1, 0x31));
    _mm256_storeu_si256(out + 3, _mm256_permute2x128_si256(u2, u3, 0x31));
  }
}

inline void philox_batch(uint64_t seed, uint64_t offset, uint64_t first_block, uint32_t* words) {
  philox_batches<1>(seed, offset, first_block, words);
}

namespace philox_detail {
LOOM_TARGET_AVX512 inline void mulhilo16(__m512i a, __m512i m, __m512i* lo, __m512i* hi) {
  *lo = _mm512_mullo_epi32(a, m);
  __m512i even = _mm512_mul_epu32(a, m), odd = _mm512_mul_epu32(_mm512_srli_epi64(a, 32), m);
  *hi = _mm512_mask_blend_epi32(0xAAAA, _mm512_srli_epi64(even, 32), odd);
}

// Sixteen blocks in the lanes of AVX-512 registers: the same arithmetic as
// philox_batch, twice as wide. Compiled for AVX-512 only; called only when the
// CPU has it.
LOOM_TARGET_AVX512 inline void philox_batch16_avx512(uint64_t seed, uint64_t offset, uint64_t first_block,
                                                     uint32_t* words) {
  alignas(64) uint32_t lo[16], hi[16];
  block_counters<16>(first_block, lo, hi);
  __m512i c0 = _mm512_load_si512(lo), c1 = _mm512_load_si512(hi);
  __m512i c2 = _mm512_set1_epi32(static_cast<int32_t>(static_cast<uint32_t>(offset)));
  __m512i c3 = _mm512_set1_epi32(static_cast<int32_t>(static_cast<uint32_t>(offset >> 32)));
  const __m512i m0 = _mm512_set1_epi32(static_cast<int32_t>(0xD2511F53u));
  const __m512i m1 = _mm512_set1_epi32(static_cast<int32_t>(0xCD9E8D57u));
  uint32_t key0 = static_cast<uint32_t>(seed), key1 = static_cast<uint32_t>(seed >> 32);
  for (int round = 0; round < 10; ++round) {
    __m512i lo0, hi0, lo1, hi1;
    mulhilo16(c0, m0, &lo0, &hi0);
    mulhilo16(c2, m1, &lo1, &hi1);
    __m512i k0 = _mm512_set1_epi32(static_cast<int32_t>(key0)), k1 = _mm512_set1_epi32(static_cast<int32_t>(key1));
    c0 = _mm512_xor_si512(_mm512_xor_si512(hi1, c1), k0);
    c1 = lo1;
    c2 = _mm512_xor_si512(_mm512_xor_si512(hi0, c3), k1);
    c3 = lo0;
    key0 += 0x9E3779B9u;
    key1 += 0xBB67AE85u;
  }
  // Element order: the AVX2 transpose within each 128-bit lane, then a 4x4
  // transpose of the 128-bit lanes themselves.
  __m512i t0 = _mm512_unpacklo_epi32(c0, c1), t1 = _mm512_unpackhi_epi32(c0, c1);
  __m512i t2 = _mm512_unpacklo_epi32(c2, c3), t3 = _mm512_unpackhi_epi32(c2, c3);
  __m512i u0 = _mm512_unpacklo_epi64(t0, t2), u1 = _mm512_unpackhi_epi64(t0, t2);
  __m512i u2 = _mm512_unpacklo_epi64(t1, t3), u3 = _mm512_unpackhi_epi64(t1, t3);
  __m512i v0 = _mm512_shuffle_i32x4(u0, u1, 0x44), v1 = _mm512_shuffle_i32x4(u2, u3, 0x44);
  __m512i v2 = _mm512_shuffle_i32x4(u0, u1, 0xEE), v3 = _mm512_shuffle_i32x4(u2, u3, 0xEE);
  _mm512_storeu_si512(words + 0, _mm512_shuffle_i32x4(v0, v1, 0x88));
  _mm512_storeu_si512(words + 16, _mm512_shuffle_i32x4(v0, v1, 0xDD));
  _mm512_storeu_si512(words + 32, _mm512_shuffle_i32x4(v2, v3, 0x88));
  _mm512_storeu_si512(words + 48, _mm512_shuffle_i32x4(v2, v3, 0xDD));
}

}  // namespace philox_detail

// Words for 32 consecutive blocks (128 words, element order): two 16-block
// AVX-512 batches when the CPU has it, else four interleaved AVX2 batches. The same
// bits either way.
inline void philox_batch32(uint64_t seed, uint64_t offset, uint64_t first_block, uint32_t* words) {
  if (avx512_enabled()) {
    philox_detail::philox_batch16_avx512(seed, offset, first_block, words);
    philox_detail::philox_batch16_avx512(seed, offset, first_block + kPhiloxChunkBlocks / 2,
                                         words + 2 * kPhiloxChunkBlocks);
  } else {
    philox_batches<4>(seed, offset, first_block, words);
  }
}
#else
inline void philox_batch(uint64_t seed, uint64_t offset, uint64_t first_block, uint32_t* words) {
  for (int b = 0; b < kPhiloxBatchBlocks; ++b) {
    Philox4x32 r = philox_block(seed, offset, first_block + b);
    for (int lane = 0; lane < 4; ++lane) words[4 * b + lane] = r.v[lane];
  }
}
inline void philox_batch32(uint64_t seed, uint64_t offset, uint64_t first_block, uint32_t* words) {
  for (int batch = 0; batch < kPhiloxChunkBlocks / kPhiloxBatchBlocks; ++batch)
    philox_batch(seed, offset, first_block + batch * kPhiloxBatchBlocks, words + 4 * batch * kPhiloxBatchBlocks);
}
#endif

}  // namespace loom
