// The float32 exp-and-sum loop of the long-row ops (softmax, log_softmax,
// cross-entropy over a vocabulary), compiled twice and chosen when the library
// loads: AVX-512 where the CPU has it, AVX2 otherwise. The loop is bound by the
// exp's arithmetic, so twice the lanes pays (as for gelu). The clones add
// instruction sets to the same -march, so the inline exp (a template with a
// lambda inside) still inlines into both; `arch=x86-64-v4` would block that.
// The two clones sum in different lane orders: a CPU gives the same bits for
// any thread count, but an AVX2 and an AVX-512 machine may differ in the last bit.
#include "rows.h"

namespace loom::detail {

namespace {
template <bool Store>
inline double exp_sum_blocks(float* out, const float* x, int64_t n, float shift) {
  double total = 0;
  for (int64_t begin = 0; begin < n; begin += kSumBlock) {
    const int64_t end = std::min(n, begin + kSumBlock);
    float partial = 0;
#pragma omp simd reduction(+ : partial)
    for (int64_t j = begin; j < end; ++j) {
      float e = exp_below_max(x[j] - shift);
      if constexpr (Store) out[j] = e;
      partial += e;
    }
    total += partial;
  }
  return total;
}
}  // namespace

#if defined(__x86_64__) && defined(__GNUC__)
#define LOOM_AVX512_CLONES __attribute__((target_clones("avx512f", "default")))
#else
#define LOOM_AVX512_CLONES
#endif

LOOM_AVX512_CLONES double sum_exp_below_max(const float* x, int64_t n, float shift) {
  return exp_sum_blocks<false>(nullptr, x, n, shift);
}

LOOM_AVX512_CLONES double store_exp_below_max(float* out, const float* x, int64_t n, float shift) {
  return exp_sum_blocks<true>(out, x, n, shift);
}

}  // namespace loom::detail
