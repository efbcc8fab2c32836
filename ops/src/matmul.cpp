// matmul(a, b): matrix product with NumPy semantics. For a [..., M, K] and
// b [..., K, N] (batch dims broadcast):
//   out = a @ b          da = g @ b^T,   db = a^T @ g   (each summed back to its shape)
// CPU kernels: ops/cpu/matmul.cpp (OpenBLAS and oneDNN gemms, transposes folded
// into the call, beside the plain triple loop) and ops/cpu/matmul_bf16.cpp; in bf16
// precision a Linear's product rounds its operands once (ops/cpu/matmul_rounded_once.cpp).

#include "elementwise.h"
#include "matmul_rounded_once.h"

namespace loom {

namespace {

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
    auto da = [&] {
      return detail::stored_transposed(a) ? transpose(matmul_nd(b, transpose(g, -1, -2)), -1, -2)
                                          : matmul_nd(g, transpose(b, -1, -2));
    };
    auto db = [&] {
      return detail::stored_transposed(b) ? transpose(matmul_nd(transpose(g, -1, -2), a), -1, -2)
                                          : matmul_nd(transpose(a, -1, -2), g);
    };
    return {c.needs(0) ? sum_to(da(), c.input_shape(0)) : Tensor(),
            c.needs(1) ? sum_to(db(), c.input_shape(1)) : Tensor()};
  });
}

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b, Where where) {
  CallSite site(where);
  detail::check_same_kind("matmul", a, b);
  LOOM_CHECK(a.dim() >= 1 && b.dim() >= 1, "matmul: both operands need at least 1 dim, got shapes {} and {}", a.shape(),
             b.shape());
  LOOM_CHECK(is_floating(a.dtype()), "matmul: expected float32 or float64, got {}", dtype_name(a.dtype()));
  if (detail::rounds_once(a, b)) return detail::matmul_rounded_once(a, b);
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
                 "transposed views (weight.t())"},
                {{{{2, 3, 4, 5}}, {{2, 3, 4, 5}}},  // [batch, length, heads, d] viewed as [batch, heads, ...]
                 [](const OpArgs& x) {
                   return matmul(permute(x[0], {0, 2, 1, 3}), permute(x[1], {0, 2, 3, 1}));
                 },
                 "attention's head views (batch dims that do not coalesce)"}},
    .schema = "matmul(Tensor input, Tensor other) -> Tensor",
    .invoke = [](const Arguments& a) { return matmul(a.tensor("input"), a.tensor("other")); },
};

}  // namespace loom
