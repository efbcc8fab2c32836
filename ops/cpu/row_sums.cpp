// The float32 exp-and-sum loop of the long-row ops (softmax, log_softmax,
// cross-entropy over a vocabulary), compiled twice and chosen per call by
// avx512_enabled() (loom/cpu.h): AVX-512 where the CPU has it, AVX2 otherwise.
// The loop is bound by the exp's arithmetic, so twice the lanes pays (as for
// gelu). The two sum in different lane orders: a CPU gives the same bits for any
// thread count, but the AVX2 and AVX-512 paths may differ in the last bits.
#include "row_sums.h"

#include "loom/cpu.h"

namespace loom::detail {

namespace {
LOOM_TARGET_AVX512 double sum_exp_avx512(const float* x, int64_t n, float shift) {
  return exp_sum_loop<false, float>(nullptr, x, n, shift);
}
LOOM_TARGET_AVX512 double store_exp_avx512(float* out, const float* x, int64_t n, float shift) {
  return exp_sum_loop<true>(out, x, n, shift);
}
}  // namespace

double sum_exp_below_max(const float* x, int64_t n, float shift) {
  return avx512_enabled() ? sum_exp_avx512(x, n, shift) : exp_sum_loop<false, float>(nullptr, x, n, shift);
}

double store_exp_below_max(float* out, const float* x, int64_t n, float shift) {
  return avx512_enabled() ? store_exp_avx512(out, x, n, shift) : exp_sum_loop<true>(out, x, n, shift);
}

}  // namespace loom::detail
