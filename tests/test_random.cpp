// Philox known answers, reproducibility, and same bits for any thread count.
#include <doctest/doctest.h>
#include <omp.h>

#include <cmath>
#include <cstdlib>
#include <string>

#include "loom/cpu.h"
#include "loom/ops.h"
#include "loom/philox.h"
#include "loom/philox_batch.h"

using namespace loom;

TEST_CASE("philox4x32-10 matches the Random123 known-answer vectors") {
  // Random123 tests/kat_vectors, the three "philox4x32 10" lines: counter[4] key[2] -> result[4].
  struct Kat {
    Philox4x32 counter;
    uint32_t key0, key1;
    Philox4x32 expected;
  };
  const Kat kats[] = {
      {{{0, 0, 0, 0}}, 0, 0, {{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}}},
      {{{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}},
       0xffffffff,
       0xffffffff,
       {{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}}},
      {{{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}},
       0xa4093822,
       0x299f31d0,
       {{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}}},
  };
  for (const Kat& k : kats) {
    Philox4x32 r = philox4x32_10(k.counter, k.key0, k.key1);
    for (int i = 0; i < 4; ++i) CHECK(r.v[i] == k.expected.v[i]);
  }
}

TEST_CASE("same seed gives the same numbers; each call takes a fresh offset") {
  Generator a(42), b(42);
  auto x1 = rand({1000}, {f32}, a).to_vector<float>();
  auto y1 = rand({1000}, {f32}, b).to_vector<float>();
  CHECK(x1 == y1);
  auto x2 = rand({1000}, {f32}, a).to_vector<float>();
  CHECK(x1 != x2);
  CHECK(a.offset() == 2);
  Generator c(43);
  CHECK(rand({1000}, {f32}, c).to_vector<float>() != x1);
  // Replaying from a saved offset reproduces the stream exactly.
  Generator d(42);
  d.set_offset(1);
  CHECK(rand({1000}, {f32}, d).to_vector<float>() == x2);
}

TEST_CASE("rand and randn have the right distribution") {
  Generator gen(7);
  auto u = rand({200000}, {f64}, gen).to_vector<double>();
  double mean = 0, lo = 1, hi = 0;
  for (double v : u) {
    mean += v;
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  mean /= u.size();
  CHECK(mean == doctest::Approx(0.5).epsilon(0.01));
  CHECK(lo >= 0.0);
  CHECK(hi < 1.0);
  auto z = randn({200000}, {f64}, gen).to_vector<double>();
  double zm = 0, zv = 0;
  for (double v : z) zm += v;
  zm /= z.size();
  for (double v : z) zv += (v - zm) * (v - zm);
  zv /= z.size();
  CHECK(std::abs(zm) < 0.01);
  CHECK(zv == doctest::Approx(1.0).epsilon(0.01));
}

namespace {
// A small training-like step: random init, matmul, tanh, reductions, backward.
std::vector<float> step_result(int threads) {
  omp_set_num_threads(threads);
  Generator gen(1234);
  Tensor x = rand({256, 300}, {f32}, gen, -1, 1);
  Tensor w = randn({300, 200}, {f32}, gen);
  w.requires_grad_();
  Tensor loss = mean(tanh(matmul(x, w)) * relu(matmul(x, w)));
  loss.backward();
  std::vector<float> out = w.grad().to_vector<float>();
  out.push_back(loss.item<float>());
  auto s = sum(rand({3000000}, {f32}, gen)).to_vector<float>();  // a long parallel reduction
  out.insert(out.end(), s.begin(), s.end());
  return out;
}
}  // namespace

TEST_CASE("same seed, same bits: results do not depend on the thread count") {
  int saved = omp_get_max_threads();
  Generator g1(99), g2(99);
  omp_set_num_threads(1);
  auto one = rand({1 << 20}, {f32}, g1).to_vector<float>();
  omp_set_num_threads(2);
  auto two = rand({1 << 20}, {f32}, g2).to_vector<float>();
  CHECK(one == two);

  auto step1 = step_result(1);
  auto step2 = step_result(2);
  CHECK(step1 == step2);
  omp_set_num_threads(saved);
}

TEST_CASE("the 32-block Philox path, AVX-512 (where present) and AVX2, is bit-identical to philox_block") {
  for (bool avx512 : {true, false}) {
    const bool previous = set_avx512_enabled(avx512);
    INFO("AVX-512 path: " << avx512_enabled());
    // Across the 2^32 block boundary too, inside a chunk and inside one interleaved batch.
    for (uint64_t first : {uint64_t{0}, uint64_t{999}, (uint64_t{1} << 32) - 8, (uint64_t{1} << 32) - 13}) {
      uint32_t words[4 * kPhiloxChunkBlocks];
      philox_batch32(0x123456789abcull, 5, first, words);
      for (int b = 0; b < kPhiloxChunkBlocks; ++b) {
        Philox4x32 r = philox_block(0x123456789abcull, 5, first + b);
        for (int lane = 0; lane < 4; ++lane) CHECK(words[4 * b + lane] == r.v[lane]);
      }
    }
    set_avx512_enabled(previous);
  }
}

TEST_CASE("LOOM_NO_AVX512=1 turns the AVX-512 paths off at start-up") {
  // ctest runs this binary twice: plain, and with LOOM_NO_AVX512=1 (tests/CMakeLists.txt).
  const char* env = std::getenv("LOOM_NO_AVX512");
  const bool off = env && std::string(env) == "1";
  CHECK(avx512_enabled() == (cpu_has_avx512() && !off));
  MESSAGE("CPU has AVX-512F: " << cpu_has_avx512() << "; AVX-512 paths on: " << avx512_enabled());
}

TEST_CASE("the batched Philox path is bit-identical to philox_block") {
  // Across the 2^32 block boundary too, where the counter's high word changes.
  for (uint64_t first : {uint64_t{0}, uint64_t{12345}, (uint64_t{1} << 32) - 4}) {
    uint32_t words[4 * kPhiloxBatchBlocks];
    philox_batch(0xdeadbeefcafeull, 77, first, words);
    for (int b = 0; b < kPhiloxBatchBlocks; ++b) {
      Philox4x32 r = philox_block(0xdeadbeefcafeull, 77, first + b);
      for (int lane = 0; lane < 4; ++lane) CHECK(words[4 * b + lane] == r.v[lane]);
    }
  }
}
