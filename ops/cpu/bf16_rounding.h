#pragma once
// float32 matmul operands rounded to bfloat16 (bf16 matmul precision) the way the
// AVX512-BF16 instructions do: to nearest even, NaN kept quiet, and a float32
// denormal flushed to a signed zero. oneDNN's bf16 dot products flush bf16
// denormals anyway, so the flush loses nothing they kept; and with the same rule in
// matmul's reference loop, both kernels round alike.
#include <cstdint>

#include "loom/bfloat16.h"

namespace loom::detail {

constexpr uint16_t matmul_bf16_bits(float value) {
  const uint32_t u = std::bit_cast<uint32_t>(value);
  if ((u & 0x7f800000u) == 0) return static_cast<uint16_t>((u >> 16) & 0x8000u);  // zero or denormal
  return bfloat16::round_to_bf16_bits(value);
}

// The same value held in float32: a bfloat16 is float32's upper 16 bits.
constexpr float matmul_bf16_rounded(float value) {
  return std::bit_cast<float>(static_cast<uint32_t>(matmul_bf16_bits(value)) << 16);
}

// rows x cols of a float32 matrix with row stride ld, rounded by matmul_bf16_bits
// into out (dense, row stride cols). With AVX512-BF16 it is one conversion
// instruction per 32 values, 2.2-2.5x faster than the integer arithmetic (measured).
void round_rows_to_bf16(const float* data, int64_t rows, int64_t cols, int64_t ld, bfloat16* out);

}  // namespace loom::detail
