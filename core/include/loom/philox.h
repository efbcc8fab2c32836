#pragma once
// Philox 4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3",
// SC 2011): a counter-based generator. The numbers are a pure function of
// (key, counter), so element i of a random tensor is the same whichever thread,
// or device, computes it.
#include <cstdint>

#include "loom/hostdevice.h"

namespace loom {

struct Philox4x32 {
  uint32_t v[4];
};

LOOM_HD uint32_t philox_mulhilo(uint32_t a, uint32_t b, uint32_t* hi) {
  uint64_t product = static_cast<uint64_t>(a) * b;
  *hi = static_cast<uint32_t>(product >> 32);
  return static_cast<uint32_t>(product);
}

// One Philox round: two 32x32->64 multiplies, then a Feistel-like mix with the key.
LOOM_HD Philox4x32 philox_round(Philox4x32 c, uint32_t key0, uint32_t key1) {
  constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
  uint32_t hi0, hi1;
  uint32_t lo0 = philox_mulhilo(kMul0, c.v[0], &hi0);
  uint32_t lo1 = philox_mulhilo(kMul1, c.v[2], &hi1);
  return {{hi1 ^ c.v[1] ^ key0, lo1, hi0 ^ c.v[3] ^ key1, lo0}};
}

// Ten rounds of Philox 4x32 on `counter` under the 64-bit `key`, the key bumped
// by the Weyl constants between rounds. Written out (no loop) so a loop over
// blocks vectorizes: eight blocks per AVX2 instruction.
LOOM_HD Philox4x32 philox4x32_10(Philox4x32 counter, uint32_t key0, uint32_t key1) {
  constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
  counter = philox_round(counter, key0, key1);
  counter = philox_round(counter, key0 + 1 * kWeyl0, key1 + 1 * kWeyl1);
  counter = philox_round(counter, key0 + 2 * kWeyl0, key1 + 2 * kWeyl1);
  counter = philox_round(counter, key0 + 3 * kWeyl0, key1 + 3 * kWeyl1);
  counter = philox_round(counter, key0 + 4 * kWeyl0, key1 + 4 * kWeyl1);
  counter = philox_round(counter, key0 + 5 * kWeyl0, key1 + 5 * kWeyl1);
  counter = philox_round(counter, key0 + 6 * kWeyl0, key1 + 6 * kWeyl1);
  counter = philox_round(counter, key0 + 7 * kWeyl0, key1 + 7 * kWeyl1);
  counter = philox_round(counter, key0 + 8 * kWeyl0, key1 + 8 * kWeyl1);
  counter = philox_round(counter, key0 + 9 * kWeyl0, key1 + 9 * kWeyl1);
  return counter;
}

// Four 32-bit random words for block `block` of the stream (seed, offset).
LOOM_HD Philox4x32 philox_block(uint64_t seed, uint64_t offset, uint64_t block) {
  Philox4x32 counter = {{static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32),
                         static_cast<uint32_t>(offset), static_cast<uint32_t>(offset >> 32)}};
  return philox4x32_10(counter, static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
}

// A uniform float in [0, 1) from 24 random bits (exactly representable).
LOOM_HD float uniform_from_bits(uint32_t bits) { return static_cast<float>(bits >> 8) * (1.0f / 16777216.0f); }
// A uniform double in [0, 1) from 53 random bits.
LOOM_HD double uniform_double_from_bits(uint32_t hi, uint32_t lo) {
  uint64_t bits = (static_cast<uint64_t>(hi) << 21) ^ (lo >> 11);
  return static_cast<double>(bits & ((1ull << 53) - 1)) * (1.0 / 9007199254740992.0);
}

}  // namespace loom
