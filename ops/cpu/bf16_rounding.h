#pragma once
// float32 rows rounded to bfloat16 fast: the cast's rounding (bfloat16.h: to
// nearest even, NaN kept quiet) for a float32 -> bfloat16 copy and for the
// operands of bf16-precision matmuls.
#include <cstdint>

#include "loom/bfloat16.h"

namespace loom::detail {

// rows x cols of a float32 matrix with row stride ld, rounded into out (dense,
// row stride cols), each value exactly as bfloat16(value). With AVX512-BF16 it is
// one conversion instruction per 32 values, 2.2-2.5x the integer arithmetic's
// speed (measured); the instruction flushes denormals, so a group of 32 holding
// one is rounded the long way.
void round_rows_to_bf16(const float* data, int64_t rows, int64_t cols, int64_t ld, bfloat16* out);

// Whether the CPU has the AVX512-BF16 instructions (conversion and VDPBF16PS).
bool cpu_has_avx512_bf16();

}  // namespace loom::detail
