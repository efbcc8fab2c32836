// Fused ops: forward values against PyTorch, numerical edge cases (huge logits,
// fully masked rows), dropout's thread-count independence, cross-entropy errors.
// Gradients (and fused == composed) are covered by the registry matrix.
#include <doctest/doctest.h>
#include <omp.h>

#include <cmath>
#include <tuple>

#include "loom/cpu.h"
#include "loom/kernel_table.h"
#include "loom/ops.h"

using namespace loom;

namespace {

void check_values(const Tensor& t, const std::vector<double>& expected, double eps = 1e-12) {
  auto v = t.to_vector<double>();
  REQUIRE(v.size() == expected.size());
  for (size_t i = 0; i < v.size(); ++i) CHECK(v[i] == doctest::Approx(expected[i]).epsilon(eps));
}

bool all_finite(const Tensor& t) {
  for (double v : t.to_vector<double>())
    if (!std::isfinite(v)) return false;
  return true;
}

Tensor bool_tensor(const std::vector<bool>& values, const Shape& shape) {
  Tensor m = Tensor::empty(shape, {DType::b8});
  for (size_t i = 0; i < values.size(); ++i) m.data<bool>()[i] = values[i];
  return m;
}

Tensor ids(const std::vector<int64_t>& values) {
  return from_vector(values, {static_cast<int64_t>(values.size())}, {DType::i64});
}

}  // namespace

// Provenance of every expected value below: /usr/bin/python3 with torch, float64:
//   x = torch.tensor([[1.,2.,3.,4.],[-1.,0.,1.,2.5]], dtype=torch.float64)
//   torch.softmax(x, -1).flatten().tolist(); torch.log_softmax(x, -1).flatten().tolist()
TEST_CASE("softmax and log_softmax match PyTorch") {
  Tensor x = tensor({{1., 2., 3., 4.}, {-1., 0., 1., 2.5}}, f64);
  check_values(softmax(x), {0.03205860328008499, 0.08714431874203257, 0.23688281808991016, 0.6439142598879724,
                            0.022612775055033882, 0.061467895523130596, 0.16708706343414498, 0.7488322659876905});
  check_values(log_softmax(x), {-3.4401896985611953, -2.4401896985611953, -1.4401896985611953, -0.44018969856119533,
                                -3.7892402644857746, -2.7892402644857746, -1.7892402644857746, -0.2892402644857746});
  // Over dim 0 equals over the last dim of the transpose.
  check_values(softmax(x, 0), softmax(transpose(x, 0, 1)).transpose(0, 1).to_vector<double>(), 1e-15);
}

// x = torch.tensor([[1.,2.,3.,4.],[0.5,-1.,2.,0.]], dtype=torch.float64)
// w = torch.tensor([1.,0.5,-1.,2.], dtype=torch.float64); b = torch.tensor([0.,0.1,0.2,-0.3], dtype=torch.float64)
// torch.nn.functional.layer_norm(x, (4,), w, b, 1e-5).flatten().tolist()
TEST_CASE("layer_norm matches PyTorch") {
  Tensor x = tensor({{1., 2., 3., 4.}, {0.5, -1., 2., 0.}}, f64);
  Tensor w = tensor({1., 0.5, -1., 2.}, f64), b = tensor({0., 0.1, 0.2, -0.3}, f64);
  check_values(layer_norm(x, w, b, 1e-5),
               {-1.341635419968927, -0.12360590332815455, -0.24721180665630887, 2.383270839937854, 0.11546956116884854,
                -0.5350825864286669, -1.301104295195031, -0.9928173670130911});
  // float32 agrees to float32 precision.
  check_values(layer_norm(x.to(f32), w.to(f32), b.to(f32)), layer_norm(x, w, b).to_vector<double>(), 1e-5);
}

// lg = torch.tensor([[1.,2.,0.5],[0.1,-1.,2.],[3.,0.,1.]], dtype=torch.float64, requires_grad=True)
// t = torch.tensor([2,-100,0])
// l = torch.nn.functional.cross_entropy(lg, t, label_smoothing=0.1, ignore_index=-100); l.backward()
// l.item(); lg.grad.flatten().tolist()
TEST_CASE("label-smoothed cross-entropy matches PyTorch (value and gradient)") {
  Tensor logits = tensor({{1., 2., 0.5}, {0.1, -1., 2.}, {3., 0., 1.}}, f64);
  logits.requires_grad_();
  Tensor loss = label_smoothed_cross_entropy(logits, ids({2, -100, 0}), 0.1);
  CHECK(loss.item<double>() == doctest::Approx(1.1171074018321152).epsilon(1e-12));
  loss.backward();
  check_values(logits.grad(), {0.09894528214440786, 0.29759919293921455, -0.39654447508362245, 0.0, 0.0, 0.0,
                               -0.04476929942599689, 0.004338366400366358, 0.04043093302563057});
}

TEST_CASE("logits of magnitude 1e4 stay finite and correct") {
  const double e1 = std::exp(-1.0);
  for (DType dt : {f64, f32}) {
    Tensor x = tensor({{1e4, 1e4 - 1, -1e4}, {-1e4, -1e4, -1e4}}, dt);
    Tensor y = softmax(x), ly = log_softmax(x);
    CHECK(all_finite(y));
    CHECK(all_finite(ly));
    double tol = dt == f64 ? 1e-12 : 1e-6;
    check_values(y, {1 / (1 + e1), e1 / (1 + e1), 0.0, 1 / 3.0, 1 / 3.0, 1 / 3.0}, tol);
    auto l = ly.to_vector<double>();
    CHECK(l[0] == doctest::Approx(-std::log1p(e1)).epsilon(tol));
    CHECK(l[2] == doctest::Approx(-2e4 - std::log1p(e1)).epsilon(tol));
    CHECK(l[3] == doctest::Approx(-std::log(3.0)).epsilon(tol));
    Tensor loss = label_smoothed_cross_entropy(x, ids({0, 2}), 0.1);
    CHECK(std::isfinite(loss.item<double>()));
  }
}

TEST_CASE("fully masked rows: softmax 0, log_softmax -inf, gradients 0, no NaN") {
  Tensor x = tensor({{0.5, -1., 2.}, {1., 2., 3.}}, f64);
  // Row 0 fully masked, row 1 masks its last entry.
  Tensor mask = bool_tensor({true, true, true, false, false, true}, {2, 3});
  Tensor g = tensor({{1., 2., 3.}, {0.5, -1., 4.}}, f64);

  x.requires_grad_();
  Tensor y = softmax(x, -1, mask);
  auto yv = y.to_vector<double>();
  CHECK(yv[0] == 0.0);
  CHECK(yv[1] == 0.0);
  CHECK(yv[2] == 0.0);
  CHECK(yv[5] == 0.0);
  CHECK(yv[3] + yv[4] == doctest::Approx(1.0));
  auto gx = grad({y}, {x}, {g})[0];
  CHECK(all_finite(gx));
  auto gxv = gx.to_vector<double>();
  for (int i : {0, 1, 2, 5}) CHECK(gxv[i] == 0.0);

  Tensor ly = log_softmax(x, -1, mask);
  auto lv = ly.to_vector<double>();
  for (int i : {0, 1, 2, 5}) CHECK(lv[i] == -INFINITY);
  CHECK(std::exp(lv[3]) + std::exp(lv[4]) == doctest::Approx(1.0));
  auto lg = grad({ly}, {x}, {g})[0].to_vector<double>();
  for (int i : {0, 1, 2, 5}) CHECK(lg[i] == 0.0);
  CHECK(lg[3] == doctest::Approx(0.5 - std::exp(lv[3]) * (0.5 - 1.0)));

  // The same through an additive -inf mask, and a second derivative stays finite.
  Tensor additive = tensor({{-INFINITY, -INFINITY, -INFINITY}, {0., 0., -INFINITY}}, f64);
  Tensor y2 = softmax(x, -1, additive);
  check_values(y2, yv, 1e-15);
  Tensor first = grad({y2}, {x}, {g}, true, true)[0];
  Tensor second = grad({sum(mul(first, first))}, {x})[0];
  CHECK(all_finite(second));

  // A mask of the wrong shape names both shapes.
  CHECK_THROWS_WITH_AS(softmax(x, -1, bool_tensor({true, false}, {2})), doctest::Contains("cannot be broadcast"),
                       Error);
}

TEST_CASE("attention exposes its weights and honours a causal mask") {
  Generator gen(3);
  Tensor q = randn({1, 2, 4, 3}, {f64}, gen), k = randn({1, 2, 4, 3}, {f64}, gen), v = randn({1, 2, 4, 5}, {f64}, gen);
  Tensor mask = bool_tensor(
      {false, true, true, true, false, false, true, true, false, false, false, true, false, false, false, false},
      {4, 4});
  Tensor weights;
  Tensor out = scaled_dot_product_attention(q, k, v, mask, 0.0, false, gen, &weights);
  CHECK(out.shape() == Shape{1, 2, 4, 5});
  REQUIRE(weights.shape() == Shape{1, 2, 4, 4});
  auto w = weights.to_vector<double>();
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 4; ++j)
      if (j > i) CHECK(w[i * 4 + j] == 0.0);
  CHECK(w[0] == doctest::Approx(1.0));  // the first position sees only itself
  check_values(out, matmul(weights, v).to_vector<double>(), 1e-14);
}

TEST_CASE("dropout: same mask for any thread count, keep fraction 1 - p, identity when off") {
  const int64_t n = int64_t(1) << 20;
  Tensor x = ones({n}, {f32});
  int saved = omp_get_max_threads();
  Generator g1(42), g2(42);
  omp_set_num_threads(1);
  Tensor a = dropout(x, 0.3, true, g1);
  omp_set_num_threads(2);
  Tensor b = dropout(x, 0.3, true, g2);
  omp_set_num_threads(saved);
  auto av = a.to_vector<float>(), bv = b.to_vector<float>();
  CHECK(av == bv);
  int64_t kept = 0, other = 0;
  const float scale = static_cast<float>(1.0 / 0.7);
  for (float v : av) {
    kept += v == scale;
    other += v != scale && v != 0.0f;
  }
  CHECK(other == 0);  // every element is dropped (0) or kept and scaled by 1/(1-p)
  double fraction = static_cast<double>(kept) / static_cast<double>(n);
  CHECK(fraction == doctest::Approx(0.7).epsilon(0.005));  // 0.7 +- 0.0035: > 7 sigma at n = 2^20
  // A generator advances: the next call draws a different mask.
  CHECK(dropout(x, 0.3, true, g1).to_vector<float>() != av);
  // Reference kernel: the same mask.
  {
    KernelModeGuard reference(KernelMode::reference);
    Generator g3(42);
    CHECK(dropout(x, 0.3, true, g3).to_vector<float>() == av);
  }
  // Lengths that end inside a Philox chunk (128 elements) and inside a mask word
  // (32), above and below the parallel grain: the fast kernel's bits are the reference's.
  for (int64_t length : {int64_t{100003}, int64_t{160}, int64_t{37}, int64_t{5}}) {
    Tensor y = ones({length}, {f32});
    Generator fast_gen(5), reference_gen(5);
    auto fast = dropout(y, 0.3, true, fast_gen).to_vector<float>();
    KernelModeGuard reference(KernelMode::reference);
    CHECK(dropout(y, 0.3, true, reference_gen).to_vector<float>() == fast);
  }
  // Off: the input itself.
  CHECK(dropout(x, 0.3, false, g1).same(x));
  CHECK(dropout(x, 0.0, true, g1).same(x));
  CHECK_THROWS_AS(dropout(x, 1.5, true, g1), Error);
}

TEST_CASE("relu_dropout: dropout(relu(x))'s bits forward and backward, any thread count, fast and reference") {
  int saved = omp_get_max_threads();
  // Lengths that end inside a Philox chunk (128) and a mask word (32), above and below the parallel grain.
  for (int64_t length : {int64_t{100003}, int64_t{160}, int64_t{37}}) {
    Generator data(7);
    Tensor x = randn({length}, {f32}, data), g = randn({length}, {f32}, data);
    for (KernelMode mode : {KernelMode::fast, KernelMode::reference}) {
      KernelModeGuard guard(mode);
      // The composition, and its backward: dropout_backward, then relu_backward.
      Tensor xc = x.detach();
      xc.requires_grad_();
      Generator composed_gen(5);
      Tensor composed = dropout(relu(xc), 0.3, true, composed_gen);
      composed.backward(g);
      for (int threads : {1, 2}) {
        INFO("length ", length, ", ", mode == KernelMode::fast ? "fast" : "reference", ", threads ", threads);
        omp_set_num_threads(threads);
        Tensor xf = x.detach();
        xf.requires_grad_();
        Generator fused_gen(5);
        Tensor fused = relu_dropout(xf, 0.3, true, fused_gen);
        CHECK(fused.to_vector<float>() == composed.to_vector<float>());
        fused.backward(g);
        CHECK(xf.grad().to_vector<float>() == xc.grad().to_vector<float>());
      }
      omp_set_num_threads(saved);
    }
  }
  Tensor x = randn({3, 5}, {f32});
  Generator gen(1);
  CHECK(relu_dropout(x, 0.3, false, gen).to_vector<float>() == relu(x).to_vector<float>());  // off: relu(x)
  CHECK_THROWS_AS(relu_dropout(x, -0.1, true, gen), Error);
}

// The backward reads the forward's saved bitmask: its gradient must drop exactly
// the elements the forward dropped, on both kernels, for thread counts 1 and 2,
// and for a length that ends in a partial mask word.
TEST_CASE("dropout: backward keeps exactly the forward's kept elements") {
  const int64_t n = 100003;  // > kParallelGrain, and n % 32 != 0
  Generator data(9);
  Tensor x = randn({n}, {f32}, data);
  Tensor g = randn({n}, {f32}, data);
  auto gv = g.to_vector<float>();
  int saved = omp_get_max_threads();
  for (KernelMode mode : {KernelMode::fast, KernelMode::reference}) {
    for (int threads : {1, 2}) {
      KernelModeGuard guard(mode);
      omp_set_num_threads(threads);
      Tensor leaf = x.detach();
      leaf.requires_grad_();
      Generator gen(77);
      Tensor out = dropout(leaf, 0.25, true, gen);
      Tensor dx = grad({out}, {leaf}, {g})[0];
      auto ov = out.to_vector<float>(), dv = dx.to_vector<float>();
      int64_t mismatches = 0;
      for (int64_t i = 0; i < n; ++i) {
        bool kept = ov[i] != 0.0f;  // randn is never exactly 0
        float expected = kept ? static_cast<float>(gv[i] / 0.75) : 0.0f;
        mismatches += std::abs(dv[i] - expected) > 1e-6f * (1 + std::abs(expected));
      }
      CHECK(mismatches == 0);
    }
  }
  omp_set_num_threads(saved);
  Tensor bad_mask = zeros({3}, {i32});
  CHECK_THROWS_AS(dropout_backward(g, bad_mask, 0.25), Error);  // 3 words for 100003 elements
}

TEST_CASE("cross-entropy: out-of-range target names the id and V; all ignored gives 0") {
  Tensor logits = tensor({{1., 2., 0.5, 0.}, {0.1, -1., 2., 3.}}, f64);
  CHECK_THROWS_WITH_AS(label_smoothed_cross_entropy(logits, ids({1, 7}), 0.1), doctest::Contains("target id 7"), Error);
  CHECK_THROWS_WITH_AS(label_smoothed_cross_entropy(logits, ids({-3, 0}), 0.1), doctest::Contains("V = 4"), Error);
  CHECK_THROWS_AS(label_smoothed_cross_entropy(logits, ids({0, 1, 2}), 0.1), Error);  // wrong target shape

  logits.requires_grad_();
  Tensor loss = label_smoothed_cross_entropy(logits, ids({-100, -100}), 0.1);
  CHECK(loss.item<double>() == 0.0);
  loss.backward();
  for (double g : logits.grad().to_vector<double>()) CHECK(g == 0.0);
}

// The float32 fast kernels take two paths: rows of up to 256 held as f32x8
// vectors in groups of 8 rows (attention), longer rows in blocked loops with
// an AVX-512 exp-sum where the CPU has it (a vocabulary). Both, for row lengths
// around every vector and block edge, against a float64 loop written here,
// with each kind of mask: row-varying bool (one row fully masked), additive
// with -inf, and a strided (transposed) bool mask read lane by lane.
TEST_CASE("float32 softmax / log_softmax / cross-entropy: every row length and mask kind vs float64") {
  Generator gen(17);
  const int64_t rows = 11;  // not a whole number of row groups
  for (int64_t n : {1, 3, 8, 13, 24, 31, 64, 255, 256, 257, 700}) {
    Tensor x = randn({rows, n}, {f32}, gen, 0, 3);
    Tensor coin = rand({rows, n}, {f64}, gen);
    Tensor bool_mask = Tensor::empty({rows, n}, {DType::b8});
    Tensor additive = Tensor::empty({rows, n}, {f32});
    Tensor strided_storage = Tensor::empty({n, rows}, {DType::b8});
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < n; ++j) {
        double u = coin.data<double>()[r * n + j];
        bool_mask.data<bool>()[r * n + j] = r == 4 || (u < 0.3 && j > 0);  // row 4 fully masked
        additive.data<float>()[r * n + j] = u < 0.2 ? -INFINITY : static_cast<float>(u - 0.5);
        strided_storage.data<bool>()[j * rows + r] = u > 0.8;
      }
    Tensor strided_mask = strided_storage.t();  // [rows, n], step `rows` along a row
    const std::vector<float> xv = x.to_vector<float>();
    for (int kind = 0; kind < 4; ++kind) {
      Tensor mask = kind == 1 ? bool_mask : kind == 2 ? additive : kind == 3 ? strided_mask : Tensor();
      INFO("n = " << n << ", mask kind " << kind);
      const std::vector<float> y = softmax(x, -1, mask).to_vector<float>();
      const std::vector<float> ly = log_softmax(x, -1, mask).to_vector<float>();
      for (int64_t r = 0; r < rows; ++r) {
        std::vector<double> z(n);
        double mx = -INFINITY;
        for (int64_t j = 0; j < n; ++j) {
          z[j] = xv[r * n + j];
          if (kind == 1 && bool_mask.data<bool>()[r * n + j]) z[j] = -INFINITY;
          if (kind == 2) z[j] += additive.data<float>()[r * n + j];
          if (kind == 3 && strided_storage.data<bool>()[j * rows + r]) z[j] = -INFINITY;
          mx = std::max(mx, z[j]);
        }
        double total = 0;
        for (int64_t j = 0; j < n; ++j) total += mx == -INFINITY ? 0.0 : std::exp(z[j] - mx);
        for (int64_t j = 0; j < n; ++j) {
          const double p = mx == -INFINITY ? 0.0 : std::exp(z[j] - mx) / total;
          const double log_p = mx == -INFINITY ? -INFINITY : (z[j] - mx) - std::log(total);
          CHECK(std::abs(y[r * n + j] - p) <= 1e-6 + 1e-5 * p);
          if (std::isinf(log_p))
            CHECK(ly[r * n + j] == -INFINITY);
          else
            CHECK(std::abs(ly[r * n + j] - log_p) <= 1e-5 * std::max(1.0, std::abs(log_p)));
        }
      }
    }
    // Cross-entropy (no mask; eps = 0.1) against the same float64 log-probabilities.
    std::vector<int64_t> targets(rows);
    for (int64_t r = 0; r < rows; ++r) targets[r] = (r * 7) % n;
    const double loss = label_smoothed_cross_entropy(x, ids(targets), 0.1).item<double>();
    double expected = 0;
    for (int64_t r = 0; r < rows; ++r) {
      double mx = -INFINITY, total = 0, mean_log_p = 0;
      for (int64_t j = 0; j < n; ++j) mx = std::max<double>(mx, xv[r * n + j]);
      for (int64_t j = 0; j < n; ++j) total += std::exp(xv[r * n + j] - mx);
      for (int64_t j = 0; j < n; ++j) mean_log_p += ((xv[r * n + j] - mx) - std::log(total)) / n;
      const double target_log_p = (xv[r * n + targets[r]] - mx) - std::log(total);
      expected += -(0.9 * target_log_p + 0.1 * mean_log_p) / rows;
    }
    INFO("cross-entropy, n = " << n);
    CHECK(loss == doctest::Approx(expected).epsilon(1e-5));
  }
}

// The long-row exp-and-sum has an AVX-512 twin (16 lanes) and an AVX2 one (8):
// their sums round in different orders, so they agree to float rounding, not bits.
TEST_CASE("long float32 rows: the AVX2 and AVX-512 exp-sum paths agree") {
  Generator gen(23);
  Tensor x = randn({6, 8000}, {f32}, gen, 0, 4);
  Tensor targets = ids({1, 7999, 4000, 0, 17, 256});
  auto run = [&] {
    return std::tuple{softmax(x).to_vector<float>(), log_softmax(x).to_vector<float>(),
                      label_smoothed_cross_entropy(x, targets, 0.1).item<double>()};
  };
  auto [p512, l512, ce512] = run();
  const bool previous = set_avx512_enabled(false);
  auto [p256, l256, ce256] = run();
  set_avx512_enabled(previous);
  for (size_t i = 0; i < p512.size(); ++i) {
    CHECK(std::abs(p512[i] - p256[i]) <= 1e-6f * p256[i] + 1e-12f);
    CHECK(std::abs(l512[i] - l256[i]) <= 1e-6f * std::abs(l256[i]) + 1e-6f);
  }
  CHECK(ce512 == doctest::Approx(ce256).epsilon(1e-6));
}

TEST_CASE("flash_attention: the same bits at 1, 2 and 3 threads, forward and backward, with dropout and a mask") {
  const int saved = omp_get_max_threads();
  std::vector<std::vector<float>> runs;
  for (int threads : {1, 2, 3}) {
    omp_set_num_threads(threads);
    Generator gen(8);
    Tensor q = randn({2, 3, 100, 16}, {f32}, gen).requires_grad_(), k = randn({2, 3, 90, 16}, {f32}, gen);
    Tensor v = randn({2, 3, 90, 8}, {f32}, gen);
    k.requires_grad_(), v.requires_grad_();
    Tensor out = flash_attention(q, k, v, causal_mask(100).narrow(1, 0, 90), 0.2, true, gen);
    sum(mul(out, randn(out.shape(), {f32}, gen))).backward();
    std::vector<float> all = out.to_vector<float>();
    for (const Tensor* t : {&q, &k, &v}) {
      const std::vector<float> g = t->grad().to_vector<float>();
      all.insert(all.end(), g.begin(), g.end());
    }
    runs.push_back(all);
  }
  omp_set_num_threads(saved);
  CHECK(runs[0] == runs[1]);
  CHECK(runs[0] == runs[2]);
}

TEST_CASE("flash_attention reads a mask that is a view at an offset (rows 2-5 of a causal mask)") {
  Generator gen(10);
  Tensor q = randn({2, 4, 8}, {f64}, gen), k = randn({2, 6, 8}, {f64}, gen), v = randn({2, 6, 3}, {f64}, gen);
  const Tensor rows = causal_mask(6).narrow(0, 2, 4);  // offset 12: row i sees keys 0..i+2
  REQUIRE(rows.offset() == 12);
  Tensor weights;
  const Tensor expected = scaled_dot_product_attention(q, k, v, rows, 0.0, false, gen, &weights);
  check_values(flash_attention(q, k, v, rows), expected.to_vector<double>(), 1e-12);
  check_values(flash_attention(q, k, v, rows.contiguous()), expected.to_vector<double>(), 1e-12);
}

TEST_CASE("scaled_dot_product_attention takes flash_attention from 2^24 weights: the composite's values") {
  Generator gen(9);
  const Shape shape{1, 1, 4096, 4};  // 4096 x 4096 = 2^24 weights
  Tensor q = randn(shape, {f32}, gen).requires_grad_(), k = randn(shape, {f32}, gen), v = randn(shape, {f32}, gen);
  Tensor fused = scaled_dot_product_attention(q, k, v, causal_mask(4096));
  REQUIRE(fused.impl().grad_fn);
  CHECK(fused.impl().grad_fn->name == "flash_attention");
  Tensor weights;  // asking for the weights takes the composite
  Tensor composite = scaled_dot_product_attention(q, k, v, causal_mask(4096), 0.0, false, gen, &weights);
  CHECK(composite.impl().grad_fn->name != "flash_attention");
  const std::vector<float> a = fused.to_vector<float>(), b = composite.to_vector<float>();
  float worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(a[i] - b[i]));
  CHECK(worst < 1e-5f);
  Tensor smaller = scaled_dot_product_attention(q.narrow(2, 0, 2048), k, v);  // 2^23 weights
  CHECK(smaller.impl().grad_fn->name != "flash_attention");
}
