#pragma once
// Sums along a row for the CPU row kernels: blocked for bounded rounding, and
// the exp-and-sum loop of softmax, log_softmax and cross-entropy.
#include <cmath>
#include <type_traits>

#include "loom/kernels/vec_math.h"
#include "row_loops.h"

namespace loom::detail {

// sum_j term(j) over a row: vector lanes of T within fixed 256-element blocks,
// the blocks added in double. float32 rows sum at vector speed (no conversions
// in the inner loop), and rounding is bounded by the block, not the row length
// (a 8000-wide vocabulary row). The blocks are fixed, so the bits never depend
// on threads. term may write (e.g. store the exponential it returns).
inline constexpr int64_t kSumBlock = 256;
// Always inlined: the AVX-512 twins in row_sums.cpp instantiate it, and only code
// inlined into a target("avx512f") function is compiled for AVX-512.
template <typename T, typename Term>
[[gnu::always_inline]] inline double blocked_row_sum(int64_t n, Term term) {
  double total = 0;
  for (int64_t begin = 0; begin < n; begin += kSumBlock) {
    const int64_t end = std::min(n, begin + kSumBlock);
    T partial = 0;
#pragma omp simd reduction(+ : partial)
    for (int64_t j = begin; j < end; ++j) partial += term(j);
    total += partial;
  }
  return total;
}

// e^x for x <= 0, a logit minus its row's max (or NaN): float32 takes the
// vector exp without its overflow clamp; float64 takes libm.
template <typename T>
inline T exp_below_max(T x) {
  if constexpr (std::is_same_v<T, float>)
    return kernels::exp_approx<float, /*NonPositive=*/true>(x);
  else
    return std::exp(x);
}

// The loop itself: sum_j exp(x_j - shift) (shift >= every x_j: the row max) as
// a blocked_row_sum; Store also writes each exp to out (which may be x).
template <bool Store, typename T>
[[gnu::always_inline]] inline double exp_sum_loop(T* out, const T* x, int64_t n, T shift) {
  return blocked_row_sum<T>(n, [&](int64_t j) {
    T e = exp_below_max(x[j] - shift);
    if constexpr (Store) out[j] = e;
    return e;
  });
}

// The float loops compiled for AVX-512 or AVX2, picked per call (row_sums.cpp).
double sum_exp_below_max(const float* x, int64_t n, float shift);
double store_exp_below_max(float* out, const float* x, int64_t n, float shift);

// sum_j exp(x_j - shift) over a row of n, also written to out when given (out may be x).
template <typename T>
double row_sum_exp(const T* x, int64_t n, T shift, T* out = nullptr) {
  if constexpr (std::is_same_v<T, float>)
    return out ? store_exp_below_max(out, x, n, shift) : sum_exp_below_max(x, n, shift);
  else
    return out ? exp_sum_loop<true>(out, x, n, shift) : exp_sum_loop<false, T>(nullptr, x, n, shift);
}

}  // namespace loom::detail
