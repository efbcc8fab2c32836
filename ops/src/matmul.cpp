// matmul(a, b): matrix product with NumPy semantics. For a [..., M, K] and
// b [..., K, N] (batch dims broadcast):
//   out = a @ b          da = g @ b^T,   db = a^T @ g   (each summed back to its shape)
// CPU kernels: ops/cpu/matmul.cpp (OpenBLAS and oneDNN gemms, transposes folded
// into the call, beside the plain triple loop) and ops/cpu/matmul_bf16.cpp.
#include <fmt/format.h>

#include "elementwise.h"
#include "loom/matmul_precision.h"

namespace loom {

namespace {

// Whether a matrix (the last two dims) is stored column by column: the transpose of
// a row-major one.
bool stored_transposed(const Tensor& t) {
  const int64_t d = t.dim();
  return t.shape()[d - 2] > 1 && t.shape()[d - 1] > 1 && t.strides()[d - 2] == 1 && t.strides()[d - 1] != 1;
}

// In bf16 matmul precision the CPU kernel rounds each float32 operand to bfloat16,
// a pass over memory per operand and product. A product autograd will
// differentiate (a Linear's) would round 6 operands per step: x and w forward,
// g and w for dx, g and x for dw. Here each is rounded once (x and w forward, g
// once for both backward products) and the bfloat16 copies are kept for backward
// in place of the float32 operands. The products are the same, bit for bit; the
// rounding passes are half. On CUDA, cuBLAS rounds inside its gemm: nothing to save there.
constexpr int64_t kRoundOnceProduct = int64_t{1} << 20;  // multiply-adds; tiny products stay in the kernel

bool rounds_once(const Tensor& a, const Tensor& b) {
  const bool bf16_on_cpu = a.device().type == DeviceType::cpu && matmul_precision() == MatmulPrecision::bf16 &&
                           cpu_bf16_matmul_available();
  const bool linear_product = a.dtype() == DType::f32 && a.dim() == 2 && b.dim() == 2 &&
                              a.shape()[1] == b.shape()[0] &&
                              a.shape()[0] * a.shape()[1] * b.shape()[1] >= kRoundOnceProduct;
  return bf16_on_cpu && linear_product && grad_enabled() && (a.requires_grad() || b.requires_grad());
}

// x rounded to bfloat16 as it is stored: a weight.t() stays a transposed view.
Tensor rounded(const Tensor& x) {
  NoGradGuard no_grad;
  if (stored_transposed(x)) return transpose(to_dtype(transpose(x, 0, 1), DType::bf16), 0, 1);
  return to_dtype(x, DType::bf16);
}

// a16 @ b16 with float32 sums and result (the bfloat16 kernel, float32 out).
Tensor product_of_rounded(const Tensor& a16, const Tensor& b16) {
  Tensor out = Tensor::empty({a16.shape()[0], b16.shape()[1]}, {DType::f32, a16.device()});
  detail::kernel_for<kernels::MatmulKernel>("matmul", a16)(out, a16, b16);
  return out;
}

Tensor matmul_rounded_once(const Tensor& a, const Tensor& b) {
  Tensor a16 = rounded(a), b16 = rounded(b);
  const bool a_transposed = stored_transposed(a), b_transposed = stored_transposed(b);
  return record("matmul", {a, b}, product_of_rounded(a16, b16),
                [a16, b16, a_transposed, b_transposed](BackwardContext& c, const Tensor& g) -> detail::Grads {
                  LOOM_CHECK(!grad_enabled(),
                             "matmul: no second derivative (create_graph) through a product taken in bf16 matmul "
                             "precision, which keeps only its rounded operands; take it in float32 precision");
                  const Tensor g16 = rounded(g);
                  auto t = [](const Tensor& x) { return transpose(x, 0, 1); };
                  // Each gradient laid out as its operand is stored, as in matmul_nd.
                  Tensor da, db;
                  if (c.needs(0))
                    da = a_transposed ? t(product_of_rounded(b16, t(g16))) : product_of_rounded(g16, t(b16));
                  if (c.needs(1))
                    db = b_transposed ? t(product_of_rounded(t(g16), a16)) : product_of_rounded(t(a16), g16);
                  return {da, db};
                });
}

// The primitive: both operands have at least 2 dims.
Tensor matmul_nd(const Tensor& a, const Tensor& b) {
  int64_t k = a.shape()[a.dim() - 1];
  LOOM_CHECK(b.shape()[b.dim() - 2] == k,
             "matmul: shapes {} and {} are not aligned: a has {} columns but b has {} rows", a.shape(), b.shape(), k,
             b.shape()[b.dim() - 2]);
  Shape a_batch(a.shape().begin(), a.shape().end() - 2), b_batch(b.shape().begin(), b.shape().end() - 2);
  Shape batch = kernels::broadcast_shapes(a_batch, b_batch, "matmul (batch dims)");
  Shape out_shape = batch;
  out_shape.push_back(a.shape()[a.dim() - 2]);
  out_shape.push_back(b.shape()[b.dim() - 1]);
  auto expanded = [&](const Tensor& t) {
    Shape shape = batch;
    shape.push_back(t.shape()[t.dim() - 2]);
    shape.push_back(t.shape()[t.dim() - 1]);
    return Tensor::make_view(t, shape, kernels::broadcast_strides(t, shape), t.offset());
  };
  Tensor out = Tensor::empty(out_shape, {a.dtype(), a.device()});
  detail::kernel_for<kernels::MatmulKernel>("matmul", a)(out, expanded(a), expanded(b));
  return record("matmul", {a, b}, out, [a, b](BackwardContext& c, const Tensor& g) -> detail::Grads {
    // Each gradient laid out as its operand is stored: for an operand stored
    // transposed (a Linear's weight.t()) the product is taken transposed,
    // (X^T)^T, so the gradient reaching the weight is dense and needs no copy.
    auto da = [&] { return stored_transposed(a) ? transpose(matmul_nd(b, transpose(g, -1, -2)), -1, -2)
                                                : matmul_nd(g, transpose(b, -1, -2)); };
    auto db = [&] { return stored_transposed(b) ? transpose(matmul_nd(transpose(g, -1, -2), a), -1, -2)
                                                : matmul_nd(transpose(a, -1, -2), g); };
    return {c.needs(0) ? sum_to(da(), c.input_shape(0)) : Tensor(),
            c.needs(1) ? sum_to(db(), c.input_shape(1)) : Tensor()};
  });
}

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
          .call = [ta, tb](const OpArgs& x) {
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

Tensor matmul(const Tensor& a, const Tensor& b, Where where) {
  CallSite site(where);
  detail::check_same_kind("matmul", a, b);
  LOOM_CHECK(a.dim() >= 1 && b.dim() >= 1, "matmul: both operands need at least 1 dim, got shapes {} and {}",
             a.shape(), b.shape());
  LOOM_CHECK(is_floating(a.dtype()), "matmul: expected float32 or float64, got {}", dtype_name(a.dtype()));
  if (rounds_once(a, b)) return matmul_rounded_once(a, b);
  // Vectors become matrices (a row on the left, a column on the right) and lose that dim again after.
  Tensor out = matmul_nd(a.dim() == 1 ? unsqueeze(a, 0) : a, b.dim() == 1 ? unsqueeze(b, -1) : b);
  if (b.dim() == 1) out = squeeze(out, -1);
  if (a.dim() == 1) out = squeeze(out, b.dim() == 1 ? -1 : -2);
  return out;
}

LOOM_OP(matmul){
    .name = "matmul",
    .formula = "y = a @ b   (batch dims broadcast)",
    .derivative = "da = g @ bᵀ;  db = aᵀ @ g   (each summed to its shape)",
    .shape_rule = "[.., M, K] @ [.., K, N] → [.., M, N]",
    .call = [](const OpArgs& x) { return matmul(x[0], x[1]); },
    .samples = {binary_sample({3, 4}, {4, 5}, Domain::any, "2-D"),
                binary_sample({2, 3, 4}, {2, 4, 2}, Domain::any, "batched"),
                binary_sample({2, 1, 3, 4}, {3, 4, 2}, Domain::any, "broadcast batch"),
                binary_sample({3, 4}, {4}, Domain::any, "matrix-vector"),
                binary_sample({4}, {4}, Domain::any, "dot"),
                binary_sample({2, 3, 4}, {4, 5}, Domain::any, "batched @ matrix"),
                {{{{4, 3}}, {{5, 4}}},
                 [](const OpArgs& x) { return matmul(transpose(x[0], 0, 1), transpose(x[1], 0, 1)); },
                 "transposed views (weight.t())"}},
    .bench = transformer_products(),
};

}  // namespace loom
