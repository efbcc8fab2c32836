// Benchmark cases of matmul: the Transformer's products, each timed beside raw
// cblas_sgemm on the same shape (GemmShape).
#include <fmt/format.h>

#include "loom/bench_case.h"
#include "loom/ops.h"

namespace loom {

namespace {

// "2x3x4", or "(2x3x4)^T" for an operand stored transposed.
std::string operand(const Shape& shape, bool transposed) {
  std::string dims = fmt::format("{}", fmt::join(shape, "x"));
  return transposed ? fmt::format("({})^T", dims) : dims;
}

// The product a @ b with a stored [batch, k, m] when transposed (weight gradients
// x^T @ g), b stored [batch, n, k] (Linear's [out, in] weight, q @ k^T); batch 1: 2-D.
BenchCase product_case(int64_t batch, int64_t m, int64_t k, int64_t n, bool ta, bool tb) {
  auto stored = [batch](int64_t rows, int64_t cols) {
    return batch == 1 ? Shape{rows, cols} : Shape{batch, rows, cols};
  };
  Shape a = ta ? stored(k, m) : stored(m, k), b = tb ? stored(n, k) : stored(k, n);
  double flops = 2.0 * batch * m * n * k;
  return {.label = fmt::format("{} {} @ {}", batch == 1 ? "matmul" : "bmm", operand(a, ta), operand(b, tb)),
          .inputs = {{a}, {b}},
          .call =
              [ta, tb](const OpArgs& x) {
                return matmul(ta ? transpose(x[0], -1, -2) : x[0], tb ? transpose(x[1], -1, -2) : x[1]);
              },
          .unit = BenchUnit::flops,
          .forward_work = flops,
          .backward_work = 2 * flops,  // dA and dB
          .formula = batch == 1 ? "fwd 2MNK, bwd 4MNK flops" : "fwd 2*B*MNK, bwd 4*B*MNK flops",
          .gemm = GemmShape{batch, m, n, k, ta, tb}};
}

// The Transformer's products: its Linear layers at d_model 512 and 256 (at 512 also
// their weight gradients and the [out, in] weight layout), then attention's, 8 heads.
std::vector<BenchCase> transformer_products() {
  using namespace bench;
  std::vector<BenchCase> cases;
  for (int64_t d : {512, 256}) {
    std::vector<std::pair<int64_t, int64_t>> kn = {{d, d}, {d, 4 * d}, {4 * d, d}, {d, vocab}};
    for (auto [k, n] : kn) cases.push_back(product_case(1, rows, k, n, false, false));
    if (d != 512) continue;
    for (auto [k, n] : kn) cases.push_back(product_case(1, k, rows, n, true, false));
    for (auto [k, n] : kn) cases.push_back(product_case(1, rows, k, n, false, true));
  }
  const int64_t bh = sentences * heads, t = tokens;
  for (int64_t head_dim : {64, 32}) {
    if (head_dim == 64) cases.push_back(product_case(bh, t, head_dim, t, false, false));  // q @ k^T, k^T contiguous
    cases.push_back(product_case(bh, t, head_dim, t, false, true));                       // q @ k.transpose(-1, -2)
    cases.push_back(product_case(bh, t, t, head_dim, false, false));                      // weights @ v
  }
  return cases;
}

}  // namespace

LOOM_BENCH(matmul){.op = "matmul", .cases = transformer_products()};

}  // namespace loom
