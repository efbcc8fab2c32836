// Reductions, joining/splitting, indexing, padding, triangles and embedding:
// forward values against values computed independently, error messages, and
// thread-count independence. Gradients are checked by the registry matrix.
//
// Provenance of the expected values: PyTorch 1.13 (Debian python3-torch), e.g.
//   /usr/bin/python3 -c "import torch; x = torch.tensor([[0.5, -1.25, 3.0, 2.0], [4.0, 1.5, -2.0, 0.25],
//     [-0.75, 2.5, 2.25, 1.0]], dtype=torch.float64); print(torch.logsumexp(x, 1), torch.var(x, 1))"
// and likewise torch.amax / max / argmax / var / cat / gather / scatter_add / index_select /
// index_add / nn.functional.pad / triu / tril / nn.functional.embedding on the inputs below.
#include <doctest/doctest.h>
#include <omp.h>

#include <cmath>
#include <cstring>

#include "loom/kernel_table.h"
#include "loom/ops.h"
#include "helpers.h"

using namespace loom;
using loom::testing::error_of;
using loom::testing::on_reference_kernels;

namespace {
Tensor x34() { return tensor({{0.5, -1.25, 3.0, 2.0}, {4.0, 1.5, -2.0, 0.25}, {-0.75, 2.5, 2.25, 1.0}}, f64); }
Tensor arange_f(int64_t n, const Shape& shape) { return reshape(to_dtype(arange(n), f64), shape) + 1.0; }
void check_values(const Tensor& t, const std::vector<double>& expected, double tol = 1e-12) {
  auto v = t.to_vector<double>();
  REQUIRE(v.size() == expected.size());
  for (size_t i = 0; i < v.size(); ++i) CHECK(v[i] == doctest::Approx(expected[i]).epsilon(tol));
}
}  // namespace

TEST_CASE("amax, max, argmax") {
  Tensor x = x34();
  check_values(amax(x, {1}), {3.0, 4.0, 2.5});
  Tensor a0 = amax(x, {0}, true);
  CHECK(a0.shape() == Shape{1, 4});
  check_values(a0, {4.0, 2.5, 3.0, 2.0});
  CHECK(amax(x).item<double>() == 4.0);
  ValuesAndIndices m = max(x, 1);
  check_values(m.values, {3.0, 4.0, 2.5});
  CHECK(m.indices.dtype() == i64);
  CHECK(m.indices.to_vector<int64_t>() == std::vector<int64_t>{2, 0, 1});
  CHECK(argmax(x, 0).to_vector<int64_t>() == std::vector<int64_t>{1, 2, 0, 0});
  CHECK(argmax(x, 0, true).shape() == Shape{1, 4});
  // First index wins on ties (as torch.argmax on CPU).
  CHECK(argmax(tensor({1.0, 3.0, 3.0, 2.0}, f64), 0).item<int64_t>() == 1);
}

TEST_CASE("argmax over rows of a contiguous last dim (the span kernel) answers as the reference loop") {
  // Rows of 8000 (greedy decoding's logits) and of lengths around the 32-element
  // blocks, each with a planted case: ties, a NaN (which wins, the first one), -inf
  // everywhere, -0.0 before +0.0, the maximum last. float32, float64 and int32.
  Generator gen(5);
  for (int64_t n : {1, 31, 32, 33, 65, 8000}) {
    CAPTURE(n);
    Tensor x = rand({7, n}, {f32}, gen, -4.0, 4.0);
    float* p = x.data<float>();
    auto row = [&](int64_t r) { return p + r * n; };
    row(1)[n - 1] = 9.0f;                                        // the maximum last
    row(2)[n / 2] = 9.0f, row(2)[n - 1] = 9.0f;                  // a tie: the first
    row(3)[n - 1] = NAN, row(3)[n / 3] = NAN, row(3)[0] = 9.0f;  // the first NaN
    for (int64_t i = 0; i < n; ++i) row(4)[i] = -INFINITY;
    for (int64_t i = 0; i < n; ++i) row(5)[i] = -1.0f;
    row(5)[n - 1] = 0.0f, row(5)[n / 2] = -0.0f;  // -0 == +0: the first of them
    const std::vector<Tensor> inputs = {x, to_dtype(x, f64), to_dtype(mul(x, scalar_tensor(100.0, {f32})), i32)};
    for (const Tensor& t : inputs) {
      CAPTURE(dtype_name(t.dtype()));
      const std::vector<int64_t> fast = argmax(t, -1).to_vector<int64_t>();
      std::vector<int64_t> reference;
      {
        KernelModeGuard plain(KernelMode::reference);
        reference = argmax(t, -1).to_vector<int64_t>();
      }
      CHECK(fast == reference);
      if (t.dtype() == f32) {
        CHECK(fast[1] == n - 1);
        CHECK(fast[2] == n / 2);
        CHECK(fast[3] == (n == 1 ? 0 : n / 3));
        CHECK(fast[4] == 0);
      }
    }
  }
}

TEST_CASE("amax splits the gradient among ties; max sends it to the argmax") {
  // torch: amax([1, 3, 3, 2]).backward() -> [0, 0.5, 0.5, 0]
  Tensor t = tensor({1.0, 3.0, 3.0, 2.0}, f64);
  t.requires_grad_();
  amax(t).backward();
  check_values(t.grad(), {0, 0.5, 0.5, 0});
  Tensor u = tensor({{1.0, 3.0, 2.0}, {5.0, 4.0, 0.0}}, f64);
  u.requires_grad_();
  sum(max(u, 1).values).backward();
  check_values(u.grad(), {0, 1, 0, 1, 0, 0});
}

TEST_CASE("logsumexp") {
  Tensor x = x34();
  check_values(logsumexp(x, {1}), {3.38132860122697876, 4.10263013855935377, 3.21329541040885713});
  check_values(logsumexp(x), {4.74292922886676216});
  // Subtracting the max: no overflow where exp(1000) is inf.
  check_values(logsumexp(tensor({1000.0, 1000.0}, f64)), {1000.69314718055989033});
  KernelModeGuard reference(KernelMode::reference);
  check_values(logsumexp(tensor({1000.0, 1000.0}, f64)), {1000.69314718055989033});
}

TEST_CASE("var") {
  Tensor x = x34();
  check_values(var(x, {1}), {3.43229166666666652, 6.26562500000000000, 2.20833333333333348});
  check_values(var(x, {}, false, 0), {2.99305555555555536});
  Tensor v0 = var(x, {0}, true);
  CHECK(v0.shape() == Shape{1, 4});
  check_values(v0, {6.06250000000000000, 3.77083333333333348, 7.27083333333333304, 0.77083333333333337});
  // Two passes: a large mean does not swamp a small spread (one-pass sum(x^2) would).
  Tensor shifted = tensor({1e9 + 1, 1e9 + 2, 1e9 + 3}, f64);
  check_values(var(shifted), {1.0});
}

TEST_CASE("cat, stack, split, chunk") {
  Tensor a = arange_f(6, {2, 3}), b = arange_f(2, {2, 1}) * 10.0;
  Tensor c = cat({a, b}, 1);
  CHECK(c.shape() == Shape{2, 4});
  check_values(c, {1, 2, 3, 10, 4, 5, 6, 20});
  Tensor s = stack({a, a}, 0);
  CHECK(s.shape() == Shape{2, 2, 3});
  check_values(s, {1, 2, 3, 4, 5, 6, 1, 2, 3, 4, 5, 6});
  auto pieces = split(arange_f(7, {7}), 3);
  REQUIRE(pieces.size() == 3);
  CHECK(pieces[2].shape() == Shape{1});
  check_values(pieces[1], {4, 5, 6});
  auto chunks = chunk(arange_f(6, {6}), 4);  // torch.chunk: size ceil(6/4)=2 -> 3 pieces
  CHECK(chunks.size() == 3);
  check_values(cat(chunks), {1, 2, 3, 4, 5, 6});
}

TEST_CASE("cat shape mismatch names both shapes") {
  Tensor a = zeros({2, 3}, {f64}), b = zeros({3, 3}, {f64});
  std::string msg = error_of([&] { cat({a, b}, 1); });
  CHECK(msg.find("cat") != std::string::npos);
  CHECK(msg.find("[2, 3]") != std::string::npos);
  CHECK(msg.find("[3, 3]") != std::string::npos);
}

TEST_CASE("gather, scatter_add, index_select, index_add") {
  Tensor x = arange_f(12, {3, 4});
  Tensor idx = from_vector<int64_t>({3, 0, 1, 1, 2, 0}, {3, 2}, {i64});
  check_values(gather(x, 1, idx), {4, 1, 6, 6, 11, 9});
  Tensor src = tensor({{1.0, 2.0}, {3.0, 4.0}, {5.0, 6.0}}, f64);
  check_values(scatter_add(zeros({3, 4}, {f64}), 1, idx, src), {2, 0, 0, 1, 0, 7, 0, 0, 6, 0, 5, 0});
  Tensor rows = from_vector<int64_t>({2, 0, 2}, {3}, {i64});
  check_values(index_select(x, 0, rows), {9, 10, 11, 12, 1, 2, 3, 4, 9, 10, 11, 12});
  check_values(index_add(zeros({3, 2}, {f64}), 0, rows, src), {3, 4, 0, 0, 6, 8});
  std::string msg = error_of([&] { index_select(x, 0, from_vector<int64_t>({3}, {1}, {i64})); });
  CHECK(msg.find("index 3 is out of range") != std::string::npos);
}

TEST_CASE("index_select of views: a narrowed or permuted inner part, copied by its dense runs, equals the reference") {
  // [4, 3, 8, 5] narrowed to 6 positions along dim 2 (a decoder cache's filled part):
  // runs of 30 values; permuted: runs of 1; a size-1 dim in between changes nothing.
  Tensor x = arange_f(4 * 3 * 8 * 5, {4, 3, 8, 5});
  Tensor rows = from_vector<int64_t>({3, 0, 0, 2}, {4}, {i64});
  for (const Tensor& view : {x.narrow(2, 0, 6), x.permute({0, 2, 1, 3}), x.narrow(3, 1, 3), x.unsqueeze(2)}) {
    CAPTURE(view.shape());
    CAPTURE(view.strides());
    Tensor fast = index_select(view, 0, rows),
           reference = on_reference_kernels([&] { return index_select(view, 0, rows); });
    CHECK(fast.to_vector<double>() == reference.to_vector<double>());
    CHECK(fast.to_vector<double>() == index_select(view.contiguous(), 0, rows).to_vector<double>());
  }
}

TEST_CASE("pad, triu, tril, causal_mask") {
  Tensor p = pad(tensor({{1.0, 2.0}, {3.0, 4.0}}, f64), {1, 2, 0, 1}, 9.0);
  CHECK(p.shape() == Shape{3, 5});
  check_values(p, {9, 1, 2, 9, 9, 9, 3, 4, 9, 9, 9, 9, 9, 9, 9});
  Tensor m = arange_f(12, {3, 4});
  check_values(triu(m, 1), {0, 2, 3, 4, 0, 0, 7, 8, 0, 0, 0, 12});
  check_values(tril(m, -1), {0, 0, 0, 0, 5, 0, 0, 0, 9, 10, 0, 0});
  Tensor mask = causal_mask(3);
  CHECK(mask.dtype() == b8);
  CHECK(mask.to_vector<int64_t>() == std::vector<int64_t>{0, 1, 1, 0, 0, 1, 0, 0, 0});
}

TEST_CASE("embedding: lookup, padding_idx gets zero gradient, out-of-range ids") {
  Tensor w = arange_f(6, {3, 2});
  Tensor ids = from_vector<int64_t>({2, 0, 2, 1}, {2, 2}, {i64});
  Tensor e = embedding(w, ids);
  CHECK(e.shape() == Shape{2, 2, 2});
  check_values(e, {5, 6, 1, 2, 5, 6, 3, 4});

  // torch: embedding(ids, w, padding_idx=1).backward(arange(1, 13).reshape(2, 3, 2))
  //   -> w.grad = [[7, 8], [0, 0], [11, 12], [3, 4]]
  Tensor w4 = arange_f(8, {4, 2});
  w4.requires_grad_();
  Tensor ids4 = from_vector<int64_t>({1, 3, 1, 0, 1, 2}, {2, 3}, {i64});
  Tensor out = embedding(w4, ids4, 1);
  check_values(select(select(out, 0, 0), 0, 0), {3, 4});  // the forward still reads the padding row
  out.backward(arange_f(12, {2, 3, 2}));
  check_values(w4.grad(), {7, 8, 0, 0, 11, 12, 3, 4});

  Tensor table = zeros({8000, 4}, {f32});
  std::string msg = error_of([&] { embedding(table, from_vector<int64_t>({5, 9001}, {2}, {i64})); });
  CHECK(msg == "embedding: id 9001 is out of range for a vocabulary of 8000");
  CHECK(error_of([&] { embedding(table, from_vector<int64_t>({-1}, {1}, {i64})); }).find("id -1 is out of range") !=
        std::string::npos);
}

TEST_CASE("reductions and scatters give the same bits on 1 and 2 threads") {
  Generator gen(1234);
  Tensor big = rand({3, 100003}, {f32}, gen, -1.0, 1.0);
  Tensor ids = from_vector<int64_t>(std::vector<int64_t>(50000, 0), {50000}, {i64});
  {
    int64_t* p = ids.data<int64_t>();
    for (int64_t i = 0; i < 50000; ++i) p[i] = (i * 7919) % 97;
  }
  Tensor rows = rand({50000, 8}, {f32}, gen, -1.0, 1.0);
  // The Transformer's shapes: column sums (a bias gradient), row sums, layer norm's
  // backward (dx and the [dweight; dbias] block partials), a wide embedding gradient.
  Tensor act = rand({1536, 512}, {f32}, gen, -1.0, 1.0);
  Tensor g = rand({1536, 512}, {f32}, gen, -1.0, 1.0);
  Tensor lw = rand({512}, {f32}, gen, -1.0, 1.0);
  Tensor wide_ids = from_vector<int64_t>(std::vector<int64_t>(1536, 0), {1536}, {i64});
  for (int64_t i = 0; i < 1536; ++i) wide_ids.data<int64_t>()[i] = (i * 7919) % 1000;
  auto run = [&] {
    return std::vector<Tensor>{sum(big),
                               sum(big, {1}),
                               amax(big),
                               logsumexp(big),
                               logsumexp(big, {1}),
                               var(big),
                               argmax(reshape(big, {-1}), 0),
                               embedding_backward(rows, ids, 97),
                               sum(act, {0}),
                               sum(act, {1}),
                               layer_norm_backward(act, lw, g),
                               layer_norm_param_grads(act, g),
                               embedding_backward(g, wide_ids, 1000, 3)};
  };
  int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  auto one = run();
  omp_set_num_threads(2);
  auto two = run();
  omp_set_num_threads(threads);
  for (size_t k = 0; k < one.size(); ++k) {
    CAPTURE(k);
    REQUIRE(one[k].numel() == two[k].numel());
    size_t bytes = one[k].numel() * dtype_size(one[k].dtype());
    CHECK(std::memcmp(one[k].contiguous().raw_data(), two[k].contiguous().raw_data(), bytes) == 0);
  }
  // And the blocked, vectorized kernels agree with the plain reference loops.
  double fast_sum = sum(big).item<double>();
  int64_t fast_argmax = argmax(reshape(big, {-1}), 0).item<int64_t>();
  double fast_amax = amax(big).item<double>(), fast_lse = logsumexp(big).item<double>();
  KernelModeGuard reference(KernelMode::reference);
  CHECK(sum(big).item<double>() == doctest::Approx(fast_sum).epsilon(1e-6));
  CHECK(argmax(reshape(big, {-1}), 0).item<int64_t>() == fast_argmax);
  CHECK(amax(big).item<double>() == fast_amax);
  CHECK(logsumexp(big).item<double>() == doctest::Approx(fast_lse).epsilon(1e-6));
}
