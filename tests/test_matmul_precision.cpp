// The matmul kernels' precision: bfloat16 products (oneDNN and the reference loop),
// bf16 matmul precision for float32 tensors (operands rounded once, tiny products
// left in float32), the float32 -> bfloat16 rounding, and the few-rows X @ W^T
// kernels (skinny, and by a packed weight); each against float64 (or the sum it
// must equal) and for the same bits at 1 and 2 threads.
#include <doctest/doctest.h>

#include <omp.h>
#include <pthread.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cmath>
#include <limits>
#include <string>

#include "loom/cpu.h"
#include "loom/kernel_table.h"
#include "loom/matmul_precision.h"
#include "loom/ops.h"
#include "loom/ops/packed_weights.h"
#include "helpers.h"

using namespace loom;
using loom::testing::on_reference_kernels;

TEST_CASE("bfloat16 matmul: oneDNN and the reference loop agree with float64 on the same bf16 inputs") {
  // Both accumulate in float32 and round once to bf16, so each element is within
  // one bf16 rounding (2^-8 relative) of the exact product of the rounded inputs,
  // plus float32 summation error (tiny at k = 64).
  Tensor a = to_dtype(randn({3, 40, 64}), bf16);
  Tensor b = to_dtype(randn({50, 64}), bf16);
  Tensor bt = transpose(b, 0, 1);  // broadcast over the batch, transposed: the kernel makes it dense
  Tensor exact = matmul(to_dtype(a, f64), to_dtype(bt, f64));
  Tensor fast = matmul(a, bt);
  Tensor reference = on_reference_kernels([&] { return matmul(a, bt); });
  CHECK(fast.dtype() == bf16);
  CHECK(fast.shape() == Shape{3, 40, 50});
  for (const Tensor& result : {fast, reference}) {
    std::vector<double> got = result.to_vector<double>(), want = exact.to_vector<double>();
    double worst = 0;
    for (size_t i = 0; i < got.size(); ++i)
      worst = std::max(worst, std::abs(got[i] - want[i]) / (std::abs(want[i]) + 1e-3));
    INFO("worst relative error ", worst);
    CHECK(worst <= 0x1p-8 + 1e-4);
  }
}

namespace {
// Whether a @ b has the same bits on 1 thread as on 2.
bool same_bits_for_1_and_2_threads(const Tensor& a, const Tensor& b) {
  const int threads = omp_get_max_threads();
  omp_set_num_threads(2);
  std::vector<float> two = matmul(a, b).to_vector<float>();
  omp_set_num_threads(1);
  std::vector<float> one = matmul(a, b).to_vector<float>();
  omp_set_num_threads(threads);
  return one == two;
}
}  // namespace

TEST_CASE("bfloat16 matmul: the same bits for 1 and 2 threads") {
  CHECK(same_bits_for_1_and_2_threads(to_dtype(randn({768, 512}), bf16), to_dtype(randn({512, 1024}), bf16)));
}

namespace {
// Rounds a float32 tensor to bfloat16 and back: the values a bf16 product reads.
Tensor bf16_rounded(const Tensor& x) { return to_dtype(to_dtype(x, bf16), f64); }

// The largest error of `got` against `want`, each element's measured against the
// sum of its products' magnitudes (|a| @ |b|): what bounds a float32 sum's error.
double worst_relative(const Tensor& got, const Tensor& want, const Tensor& magnitude) {
  std::vector<double> g = got.to_vector<double>(), w = want.to_vector<double>(), s = magnitude.to_vector<double>();
  double worst = 0;
  for (size_t i = 0; i < g.size(); ++i) worst = std::max(worst, std::abs(g[i] - w[i]) / s[i]);
  return worst;
}
}  // namespace

TEST_CASE("bf16 matmul precision: float32 products of bf16-rounded operands, float32 sums and result") {
  // A product whose two row blocks are small (sgemm on the rounded values), a batch of
  // large ones (oneDNN's bf16 gemm, operands rounded per block) and one large one
  // (rounded once up front); the second operand broadcast over the batch and
  // transposed, as in a linear layer.
  for (auto [sa, sb] : {std::pair{Shape{3, 130, 64}, Shape{20, 64}},
                        {Shape{2, 300, 128}, Shape{600, 128}},
                        {Shape{1, 600, 128}, Shape{500, 128}}}) {
    INFO("a: ", sa.size(), " dims, ", sa[sa.size() - 2], " rows");
    Tensor a = randn(sa);
    Tensor bt = transpose(randn(sb), 0, 1);
    Tensor float32_result = matmul(a, bt);
    MatmulPrecisionGuard precision(MatmulPrecision::bf16);
    Tensor fast = matmul(a, bt);
    Tensor reference = on_reference_kernels([&] { return matmul(a, bt); });
    CHECK(fast.dtype() == f32);
    CHECK(fast.shape() == Shape{sa[0], sa[1], sb[0]});
    if (!cpu_bf16_matmul_available()) {
      MESSAGE("this CPU has no AVX512-BF16: bf16 precision must stay float32");
      CHECK(fast.to_vector<float>() == float32_result.to_vector<float>());
      continue;
    }
    // Exact products of the rounded operands, up to float32 summation error (at most
    // k * 2^-24 of the magnitudes' sum); the float32 result is off by the operands'
    // bf16 rounding (up to 2^-8 relative per product), far more.
    const double sum_error = static_cast<double>(sa[2]) * std::ldexp(1.0, -24);
    Tensor exact = matmul(bf16_rounded(a), bf16_rounded(bt));
    Tensor magnitude = matmul(abs(bf16_rounded(a)), abs(bf16_rounded(bt)));
    CHECK(worst_relative(fast, exact, magnitude) <= sum_error);
    CHECK(worst_relative(reference, exact, magnitude) <= sum_error);
    CHECK(worst_relative(float32_result, exact, magnitude) >= 1e-3);
  }
}

TEST_CASE("float32 -> bfloat16 on the fast kernels (casts, bf16 matmul operands): each value as bfloat16(x)") {
  // The conversion instruction takes 32 values at a time and flushes denormals: a
  // group holding one (or a NaN, an infinity, a tie) must still round as the scalar
  // rule does, and so must a tail shorter than 32.
  std::vector<float> values = randn({1000}).to_vector<float>();
  const float specials[] = {std::ldexp(1.5f, -130),
                            -std::ldexp(1.0f, -149),
                            std::bit_cast<float>(0x007fffffu),
                            std::nanf(""),
                            -std::numeric_limits<float>::infinity(),
                            1.0f + std::ldexp(1.0f, -8),
                            1.0f + 3 * std::ldexp(1.0f, -8),
                            3.4e38f,
                            -0.0f,
                            std::bit_cast<float>(0x7fa12345u)};
  for (size_t i = 0; i < std::size(specials); ++i) values[i * 97] = values[999 - i] = specials[i];
  std::vector<float> rounded = to_dtype(from_vector(values, {1000}), bf16).to_vector<float>();
  int differ = 0;
  for (size_t i = 0; i < values.size(); ++i)
    differ += std::bit_cast<uint32_t>(rounded[i]) != std::bit_cast<uint32_t>(static_cast<float>(bfloat16(values[i])));
  CHECK(differ == 0);
}

TEST_CASE("bf16 matmul precision: a tiny product (under 2^17 multiply-adds, as a head's attention) stays float32") {
  // 40 x 64 @ 64 x 50 = 128,000 multiply-adds per batch entry, just under 2^17.
  Tensor a = randn({3, 40, 64}), bt = transpose(randn({50, 64}), 0, 1);
  Tensor float32_result = matmul(a, bt);
  Tensor float32_reference = on_reference_kernels([&] { return matmul(a, bt); });
  MatmulPrecisionGuard precision(MatmulPrecision::bf16);
  CHECK(matmul(a, bt).to_vector<float>() == float32_result.to_vector<float>());
  CHECK(on_reference_kernels([&] { return matmul(a, bt); }).to_vector<float>() == float32_reference.to_vector<float>());
  // One more row (41 x 64 x 50 = 131,200) is past the line: bf16 where the CPU has it.
  Tensor a41 = randn({41, 64});
  Tensor bf16_result = matmul(a41, bt);
  MatmulPrecisionGuard back(MatmulPrecision::float32);
  CHECK((bf16_result.to_vector<float>() != matmul(a41, bt).to_vector<float>()) == cpu_bf16_matmul_available());
}

TEST_CASE("bf16 matmul precision, a product autograd differentiates: operands rounded once, the same bits") {
  if (!cpu_bf16_matmul_available()) return;
  // A Linear's product, x @ w^T: the op rounds x, w and then g once each and keeps
  // the bfloat16 copies; each value and gradient must be the bits the float32
  // kernel gives when it rounds the operands of every product itself (no grad).
  MatmulPrecisionGuard precision(MatmulPrecision::bf16);
  Tensor x = randn({300, 128}).requires_grad_(), w = randn({200, 128}).requires_grad_();
  Tensor g = randn({300, 200});
  Tensor y = matmul(x, w.t());
  y.backward(g);
  NoGradGuard no_grad;
  CHECK(y.to_vector<float>() == matmul(x, w.t()).to_vector<float>());
  CHECK(x.grad().to_vector<float>() == matmul(g, w).to_vector<float>());
  CHECK(w.grad().to_vector<float>() == matmul(g.t(), x).to_vector<float>());
  CHECK(y.to_vector<float>() != [&] {  // and they did round
    MatmulPrecisionGuard float32(MatmulPrecision::float32);
    return matmul(x, w.t()).to_vector<float>();
  }());
}

TEST_CASE("bf16 matmul precision: a second derivative through a rounded-once product is a clear error") {
  if (!cpu_bf16_matmul_available()) return;
  MatmulPrecisionGuard precision(MatmulPrecision::bf16);
  Tensor x = randn({300, 128}).requires_grad_(), w = randn({200, 128}).requires_grad_();
  Tensor loss = sum(matmul(x, w.t()));
  CHECK_THROWS_WITH_AS(grad({loss}, {x}, {}, {.create_graph = true}), doctest::Contains("second derivative"), Error);
}

TEST_CASE("float32 and bf16-precision matmuls (oneDNN's gemms where it has them): the same bits for 1 and 2 threads") {
  for (MatmulPrecision mode : {MatmulPrecision::float32, MatmulPrecision::bf16}) {
    MatmulPrecisionGuard precision(mode);
    // A large product, a long inner dimension with a small output (where a library
    // would split the sums across threads), a batch of small ones, and transposed
    // operands (a Linear's weight, and the weight gradient's X^T).
    for (auto [a, b] : {std::pair{randn({768, 512}), randn({512, 1024})},
                        {randn({16, 4096}), randn({4096, 64})},
                        {randn({64, 12, 24}), randn({64, 24, 24})},
                        {randn({600, 256}), randn({1024, 256}).t()},
                        {randn({700, 300}).t(), randn({700, 512})}}) {
      CAPTURE(a.shape());
      CAPTURE(b.shape());
      CHECK(same_bits_for_1_and_2_threads(a, b));
    }
  }
}

namespace {
// The main thread's stack, and what a signal handler saw of where it ran.
uintptr_t g_stack_low = 0, g_stack_high = 0;
std::atomic<int> g_signals_handled{0}, g_handled_off_the_stack{0};
void note_where_handled(int) {
  const auto frame = reinterpret_cast<uintptr_t>(__builtin_frame_address(0));
  g_signals_handled.fetch_add(1, std::memory_order_relaxed);
  if (frame < g_stack_low || frame >= g_stack_high) g_handled_off_the_stack.fetch_add(1, std::memory_order_relaxed);
}
}  // namespace
#ifndef sigev_notify_thread_id  // glibc < 2.38 names it only by its union member
#define sigev_notify_thread_id _sigev_un._tid
#endif

// oneDNN 2.6's jit float32 gemm, for inner dimensions over ~84, points rsp at a heap
// workspace, so a signal handled inside it wrote its frame over the heap (Ctrl-C in
// Python aborted in free(); a profiler's SIGPROF would too): oneDNN issue #4845. A
// timer signal for this thread every 100 us lands in gemm after gemm here (one OpenMP
// thread: this one); each handler checks that it runs on this thread's stack.
TEST_CASE(
    "float32 and bf16-precision matmuls: a signal arriving meanwhile is handled on the stack, not over the heap") {
  pthread_attr_t attr;
  REQUIRE(pthread_getattr_np(pthread_self(), &attr) == 0);
  void* stack = nullptr;
  size_t stack_size = 0;
  pthread_attr_getstack(&attr, &stack, &stack_size);
  pthread_attr_destroy(&attr);
  g_stack_low = reinterpret_cast<uintptr_t>(stack);
  g_stack_high = g_stack_low + stack_size;
  struct sigaction noting {
  }, previous{};
  noting.sa_handler = note_where_handled;
  noting.sa_flags = SA_RESTART;
  sigemptyset(&noting.sa_mask);
  REQUIRE(sigaction(SIGALRM, &noting, &previous) == 0);
  sigevent to_this_thread{};
  to_this_thread.sigev_notify = SIGEV_THREAD_ID;
  to_this_thread.sigev_signo = SIGALRM;
  to_this_thread.sigev_notify_thread_id = gettid();
  timer_t timer{};
  REQUIRE(timer_create(CLOCK_MONOTONIC, &to_this_thread, &timer) == 0);
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  for (MatmulPrecision mode : {MatmulPrecision::float32, MatmulPrecision::bf16}) {
    CAPTURE(mode == MatmulPrecision::bf16);
    MatmulPrecisionGuard precision(mode);
    Tensor a = randn({1024, 256}), w = randn({64, 256});  // a Linear's product, inner dimension 256
    const std::vector<float> want = matmul(a, w.t()).to_vector<float>();
    g_signals_handled = g_handled_off_the_stack = 0;
    itimerspec every_100us{{0, 100'000}, {0, 100'000}}, stop{};
    timer_settime(timer, 0, &every_100us, nullptr);
    bool same = true;
    for (int i = 0; i < 300 && same; ++i) same = matmul(a, w.t()).to_vector<float>() == want;
    timer_settime(timer, 0, &stop, nullptr);
    CHECK(same);
    CHECK(g_signals_handled.load() > 100);  // the signals did arrive while the products ran
    CHECK(g_handled_off_the_stack.load() == 0);
  }
  omp_set_num_threads(threads);
  timer_delete(timer);
  sigaction(SIGALRM, &previous, nullptr);
}

// Products of a few rows by a Linear-layout weight, X @ W^T with W [n, k] (ops/cpu/skinny_matmul.h):
// decoding's, computed as dot products in a fixed order rather than by sgemm.
TEST_CASE("float32 X @ W^T with few rows: within float32 summation error of float64") {
  for (int64_t m : {1, 3, 5, 17})
    for (int64_t n : {1, 5, 37})
      for (int64_t k : {1, 15, 16, 33, 300}) {
        Tensor x = randn({m, k}), w = randn({n, k});
        Tensor got = matmul(x, w.t());
        Tensor exact = matmul(to_dtype(x, f64), to_dtype(w, f64).t());
        Tensor magnitude = matmul(abs(to_dtype(x, f64)), abs(to_dtype(w, f64)).t());
        INFO("m ", m, " n ", n, " k ", k);
        // Any summation order is within k units of rounding of the magnitudes' sum.
        CHECK(worst_relative(got, exact, magnitude) <= static_cast<double>(k + 1) * 0x1p-24);
      }
}

TEST_CASE("float32 X @ W^T with few rows, on AVX-512: a row's bits depend on neither the other rows nor the threads") {
  if (!avx512_enabled()) return;                     // the skinny kernel is AVX-512 code; elsewhere sgemm runs
  Tensor x = randn({13, 70}), w = randn({300, 70});  // k = 70: four 16-lane steps and a padded one
  const std::vector<float> all = matmul(x, w.t()).to_vector<float>();
  for (int64_t row : {0, 6, 12}) {
    const std::vector<float> alone = matmul(x.narrow(0, row, 1), w.t()).to_vector<float>();
    CHECK(alone == std::vector<float>(all.begin() + row * 300, all.begin() + (row + 1) * 300));
  }
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  CHECK(matmul(x, w.t()).to_vector<float>() == all);
  omp_set_num_threads(threads);
}

// Tiny products (skinny_matmul.h, kTinyProduct): decoding's one-query attention products, a
// batch of one row per head, computed in place: q K^T (dot products) and weights V (sums of V's rows).
// t = 40: a product of 5 rows over the tiny limit whose single rows are under it (a
// sentence's beams attending to its source together): still a row's bits alone.
TEST_CASE("float32 tiny products: within float32 summation error of float64, a row's bits independent of the batch") {
  for (int64_t m : {1, 2, 5})
    for (int64_t t : {1, 7, 8, 9, 23, 40})
      for (int64_t d : {3, 64, 70}) {  // 70: eight 8-lane column blocks and a padded one
        INFO("m ", m, " t ", t, " d ", d);
        Tensor q = randn({6, m, d}), keys = randn({6, t, d}), weights = randn({6, m, t}), values = randn({6, t, d});
        auto check_close = [](const Tensor& got, const Tensor& x, const Tensor& y, int64_t k) {
          Tensor exact = matmul(to_dtype(x, f64), to_dtype(y, f64));
          Tensor magnitude = matmul(abs(to_dtype(x, f64)), abs(to_dtype(y, f64)));
          CHECK(worst_relative(got, exact, magnitude) <= static_cast<double>(k + 1) * 0x1p-24);
        };
        const Tensor scores = matmul(q, transpose(keys, -1, -2)), context = matmul(weights, values);
        check_close(scores, q, transpose(keys, -1, -2), d);
        check_close(context, weights, values, t);
        // One batch item alone, and one row alone: the same bits as inside the whole batch.
        CHECK(matmul(q.narrow(0, 4, 1), transpose(keys.narrow(0, 4, 1), -1, -2)).to_vector<float>() ==
              scores.narrow(0, 4, 1).to_vector<float>());
        CHECK(matmul(weights.narrow(0, 4, 1).narrow(1, m - 1, 1), values.narrow(0, 4, 1)).to_vector<float>() ==
              context.narrow(0, 4, 1).narrow(1, m - 1, 1).to_vector<float>());
        const int threads = omp_get_max_threads();
        omp_set_num_threads(1);
        CHECK(matmul(q, transpose(keys, -1, -2)).to_vector<float>() == scores.to_vector<float>());
        CHECK(matmul(weights, values).to_vector<float>() == context.to_vector<float>());
        omp_set_num_threads(threads);
      }
}

// Products by a weight that a PackedWeights guard packed (loom/ops/packed_weights.h,
// ops/cpu/packed_matmul.h): decoding's, on every CPU (AVX-512 or not). Each element is
// one chain of fused multiply-adds over k in order, the sum this test writes out.
namespace {
std::vector<float> fma_chains(const Tensor& x, const Tensor& w) {  // x [m, k] @ w [n, k]^T
  const int64_t m = x.shape()[0], n = w.shape()[0], k = x.shape()[1];
  const std::vector<float> xs = x.contiguous().to_vector<float>(), ws = w.contiguous().to_vector<float>();
  std::vector<float> c(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      float acc = 0.0f;
      for (int64_t p = 0; p < k; ++p) acc = std::fma(xs[i * k + p], ws[j * k + p], acc);
      c[i * n + j] = acc;
    }
  return c;
}

// x @ w.t() (w packed by a live guard) is `chains` bit for bit; its last row alone
// gives the same bits as among the others (a sentence's, among its batch-mates), and
// so does 1 thread.
void check_packed_product(const Tensor& x, const Tensor& w, const std::vector<float>& chains) {
  const int64_t m = x.shape()[0], n = w.shape()[0];
  const std::vector<float> all = matmul(x, w.t()).to_vector<float>();
  CHECK(all == chains);
  CHECK(matmul(x.narrow(0, m - 1, 1), w.t()).to_vector<float>() == std::vector<float>(all.end() - n, all.end()));
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  CHECK(matmul(x, w.t()).to_vector<float>() == all);
  omp_set_num_threads(threads);
  // The linear op adds its bias to each tile as it is finished: the chains plus b,
  // rounded once, as add(matmul(x, w.t()), b) gives them.
  const Tensor b = randn({n});
  const std::vector<float> bias = b.to_vector<float>();
  std::vector<float> with_bias = chains;
  for (size_t e = 0; e < with_bias.size(); ++e) with_bias[e] += bias[e % static_cast<size_t>(n)];
  CHECK(linear(x, w, b).to_vector<float>() == with_bias);
}
}  // namespace

TEST_CASE("PackedWeights: x @ w.t() by the packed copy, each element one fused multiply-add chain, any rows") {
  // n: one partial panel, whole panels, and whole plus partial; k: 1 and longer; rows:
  // 1 to 13 (whole 6-row tiles and each remainder), and 200 (two blocks of rows).
  for (int64_t n : {1, 16, 40})
    for (int64_t k : {1, 7, 64})
      for (int64_t m : {1, 2, 3, 4, 5, 6, 7, 13, 200}) {
        INFO("m ", m, " n ", n, " k ", k);
        Tensor x = randn({m, k}), w = randn({n, k});
        PackedWeights packed({w});
        REQUIRE(packed.packed() == 1);
        check_packed_product(x, w, fma_chains(x, w));
      }
}

TEST_CASE("PackedWeights: guards nest, a weight with a row stride packs, others are left alone, sgemm afterwards") {
  Tensor x = randn({9, 300}), w = randn({70, 300}), wide = randn({33, 310}).narrow(1, 5, 300);
  const std::vector<float> before = matmul(x, w.t()).to_vector<float>();
  {
    PackedWeights outer({w});
    {
      // w again (already packed: shared), a weight stored with row stride 310, and
      // four that are not float32 CPU matrices stored row by row: skipped.
      PackedWeights inner({w, wide, to_dtype(w, f64), randn({300}), w.t(), Tensor()});
      CHECK(inner.packed() == 2);
      CHECK(matmul(x, wide.t()).to_vector<float>() == fma_chains(x, wide));
    }
    CHECK(matmul(x, w.t()).to_vector<float>() == fma_chains(x, w));  // still the outer guard's copy
  }
  CHECK(matmul(x, w.t()).to_vector<float>() == before);  // no guard left: the product as before
  // With AVX-512 on or off: the packed copy, not the skinny kernel or sgemm.
  const bool avx512 = avx512_enabled();
  for (bool on : {false, true}) {
    set_avx512_enabled(on);
    PackedWeights packed({w});
    CHECK(packed.packed() == 1);
    CHECK(matmul(x, w.t()).to_vector<float>() == fma_chains(x, w));
  }
  set_avx512_enabled(avx512);
}

// In bf16 precision a guard packs a bfloat16 copy instead (AVX512-BF16 CPUs), and the
// products by it are VDPBF16PS's chain over pairs of inputs (packed_matmul.h),
// written out here. Inputs are rounded to bfloat16 first; the instruction flushes
// denormals, which randn's values never come near.
namespace {
std::vector<float> dpbf16_chains(const Tensor& x, const Tensor& w) {  // x [m, k] @ w [n, k]^T
  const int64_t m = x.shape()[0], n = w.shape()[0], k = x.shape()[1];
  auto rounded = [](const Tensor& t) {
    std::vector<float> values = t.contiguous().to_vector<float>();
    for (float& v : values) v = static_cast<float>(bfloat16(v));
    return values;
  };
  const std::vector<float> xs = rounded(x), ws = rounded(w);
  std::vector<float> c(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      float acc = 0.0f;
      for (int64_t p = 0; p < k; p += 2) {
        const float high = p + 1 < k ? xs[i * k + p + 1] * ws[j * k + p + 1] : 0.0f;  // exact: 8-bit mantissas
        acc = (acc + high) + xs[i * k + p] * ws[j * k + p];
      }
      c[i * n + j] = acc;
    }
  return c;
}
}  // namespace

TEST_CASE("PackedWeights in bf16 precision: products by the bfloat16 copy, VDPBF16PS's chain, any rows") {
  if (!cpu_bf16_matmul_available() || !avx512_enabled()) {
    MESSAGE("no AVX512-BF16 here (or LOOM_NO_AVX512 set): no bfloat16 packed copy");
    return;
  }
  // n: a partial panel, a whole one, two panels with a partial second, two whole
  // two-panel tiles and a partial panel; k: odd (a last pair with a 0) and even;
  // rows: 1 to 13 (whole 6-row tiles and each remainder) and 200 (two blocks of rows).
  for (int64_t n : {1, 16, 24, 72})
    for (int64_t k : {1, 7, 64})
      for (int64_t m : {1, 2, 5, 6, 7, 11, 12, 13, 200}) {
        INFO("m ", m, " n ", n, " k ", k);
        Tensor x = randn({m, k}), w = randn({n, k});
        const std::vector<float> unpacked_float32 = matmul(x, w.t()).to_vector<float>();
        MatmulPrecisionGuard bf16_precision(MatmulPrecision::bf16);
        PackedWeights packed({w});
        check_packed_product(x, w, dpbf16_chains(x, w));
        // Back in float32 precision: no float32 copy, so the product as without a guard.
        MatmulPrecisionGuard float32_precision(MatmulPrecision::float32);
        CHECK(matmul(x, w.t()).to_vector<float>() == unpacked_float32);
      }
  // A guard made in float32 precision packs no bfloat16 copy: in bf16 precision its
  // products are bf16 matmul's as without a guard, not the float32 copy's.
  Tensor x = randn({9, 300}), w = randn({70, 300});
  MatmulPrecisionGuard bf16_precision(MatmulPrecision::bf16);
  const std::vector<float> unpacked = matmul(x, w.t()).to_vector<float>();
  MatmulPrecisionGuard float32_precision(MatmulPrecision::float32);
  PackedWeights packed({w});
  MatmulPrecisionGuard back_to_bf16(MatmulPrecision::bf16);
  const std::vector<float> product = matmul(x, w.t()).to_vector<float>();
  CHECK(product == unpacked);
  CHECK(product != fma_chains(x, w));
}

TEST_CASE("linear: the bias added to each finished block gives add(matmul)'s bits on every product path") {
  // Shapes that reach the tiny and skinny kernels, sgemm and oneDNN blocks (split by
  // rows and by columns), in float32 and bf16 precision (outside autograd, where no
  // product rounds once), and a linear with no bias.
  const std::vector<std::array<int64_t, 3>> shapes = {{1, 16, 8},     {5, 40, 64},     {3, 1000, 256},
                                                      {300, 256, 64}, {1000, 24, 256}, {64, 2000, 300}};
  for (MatmulPrecision precision : {MatmulPrecision::float32, MatmulPrecision::bf16})
    for (const auto& [m, n, k] : shapes) {
      INFO("m ", m, " n ", n, " k ", k, " precision ", precision == MatmulPrecision::bf16 ? "bf16" : "float32");
      MatmulPrecisionGuard guard(precision);
      NoGradGuard no_grad;
      const Tensor x = randn({m, k}), w = randn({n, k}), b = randn({n});
      CHECK(linear(x, w, b).to_vector<float>() == add(matmul(x, w.t()), b).to_vector<float>());
      CHECK(linear(x, w).to_vector<float>() == matmul(x, w.t()).to_vector<float>());
    }
}

TEST_CASE("linear in bf16 precision for training: the bias joins the rounded-once product, add(matmul)'s bits") {
  if (!cpu_bf16_matmul_available()) return;
  // Row blocks (300 rows) and column blocks (1000 columns), as a step's Linears split,
  // and a single row.
  for (const auto& [m, n, k] : std::vector<std::array<int64_t, 3>>{
           {300, 200, 128}, {64, 1000, 96}, {17, 600, 128}, {1, 40, 30000}, {64, 256, 64}}) {
    INFO("m ", m, " n ", n, " k ", k);
    MatmulPrecisionGuard precision(MatmulPrecision::bf16);
    const Tensor g = randn({m, n});
    auto run = [&](bool fused) {
      manual_seed(5);
      Tensor x = randn({m, k}).requires_grad_(), w = randn({n, k}).requires_grad_(), b = randn({n}).requires_grad_();
      Tensor y = fused ? linear(x, w, b) : add(matmul(x, w.t()), b);
      // linear's node (under the reshape back to x's leading dims), or the composition's add
      CHECK((fused ? y.grad_fn()->next[0]->name : y.grad_fn()->name) == (fused ? "linear" : "add"));
      y.backward(g);
      return std::vector<std::vector<float>>{y.to_vector<float>(), x.grad().to_vector<float>(),
                                             w.grad().to_vector<float>(), b.grad().to_vector<float>()};
    };
    CHECK(run(true) == run(false));
  }
}
