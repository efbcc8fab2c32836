#pragma once
// bfloat16: the top half of a float32 (8 exponent bits, 7 mantissa bits). Stored
// as 16 bits; arithmetic happens in float32. Conversion from float32 rounds to
// nearest, ties to even (what oneDNN, PyTorch and the AVX512-BF16 instructions
// do); NaN stays NaN (a quiet one, so rounding can never carry it into infinity).
#include <bit>
#include <cstdint>
#include <type_traits>

namespace loom {

struct bfloat16 {
  uint16_t bits = 0;

  constexpr bfloat16() = default;
  constexpr explicit bfloat16(float value) : bits(round_to_bf16_bits(value)) {}
  // Assigning a float rounds it as constructing does. Kernels store this way: GCC
  // vectorizes `out[i] = float_value` under `omp simd`, not a bfloat16 temporary copied in.
  constexpr bfloat16& operator=(float value) {
    bits = round_to_bf16_bits(value);
    return *this;
  }
  constexpr operator float() const { return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16); }

  static constexpr bfloat16 from_bits(uint16_t b) {
    bfloat16 v;
    v.bits = b;
    return v;
  }

  // Branch-free (a select), so that loops converting arrays vectorize.
  static constexpr uint16_t round_to_bf16_bits(float value) {
    const uint32_t u = std::bit_cast<uint32_t>(value);
    const uint32_t lsb = (u >> 16) & 1u;  // ties go to the even neighbour
    const uint32_t rounded = (u + 0x7fffu + lsb) >> 16;
    const uint32_t quiet_nan = (u >> 16) | 0x0040u;  // NaN kept quiet, never rounded into infinity
    return static_cast<uint16_t>((u & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded);
  }
};

static_assert(sizeof(bfloat16) == 2);

// The type arithmetic on T's values happens in: float32 for bfloat16, T itself otherwise.
template <typename T>
using compute_type = std::conditional_t<std::is_same_v<T, bfloat16>, float, T>;

}  // namespace loom
