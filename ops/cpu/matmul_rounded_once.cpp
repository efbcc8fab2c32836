// bf16 matmul precision, operands rounded once per product (matmul_rounded_once.h).
#include "matmul_rounded_once.h"

#include "elementwise.h"
#include "loom/matmul_precision.h"

namespace loom::detail {

namespace {

// In bf16 matmul precision the CPU kernel rounds each float32 operand to bfloat16,
// a pass over memory per operand and product. A product autograd will
// differentiate (a Linear's) would round 6 operands per step: x and w forward,
// g and w for dx, g and x for dw. Here each is rounded once (x and w forward, g
// once for both backward products) and the bfloat16 copies are kept for backward
// in place of the float32 operands. The products are the same, bit for bit; the
// rounding passes are half. On CUDA, cuBLAS rounds inside its gemm: nothing to save there.
constexpr int64_t kRoundOnceProduct = int64_t{1} << 20;  // multiply-adds; tiny products stay in the kernel

// x rounded to bfloat16 as it is stored: a weight.t() stays a transposed view.
Tensor rounded(const Tensor& x) {
  NoGradGuard no_grad;
  if (stored_transposed(x)) return transpose(to_dtype(transpose(x, 0, 1), DType::bf16), 0, 1);
  return to_dtype(x, DType::bf16);
}

// a16 @ b16 (+ bias, float32, added to each block as its gemm finishes it) with
// float32 sums and result (the bfloat16 kernels, float32 out).
Tensor product_of_rounded(const Tensor& a16, const Tensor& b16, const Tensor& bias = {}) {
  Tensor out = Tensor::empty({a16.shape()[0], b16.shape()[1]}, {DType::f32, a16.device()});
  if (bias.defined())
    kernel_for<kernels::LinearKernel>("linear", a16)(out, a16, b16, bias);
  else
    kernel_for<kernels::MatmulKernel>("matmul", a16)(out, a16, b16);
  return out;
}

}  // namespace

bool rounds_once(const Tensor& a, const Tensor& b) {
  const bool bf16_on_cpu =
      a.device().type == DeviceType::cpu && matmul_precision() == MatmulPrecision::bf16 && cpu_bf16_matmul_available();
  const bool linear_product = a.dtype() == DType::f32 && a.dim() == 2 && b.dim() == 2 && a.shape()[1] == b.shape()[0] &&
                              a.shape()[0] * a.shape()[1] * b.shape()[1] >= kRoundOnceProduct;
  return bf16_on_cpu && linear_product && grad_enabled() && (a.requires_grad() || b.requires_grad());
}

Tensor matmul_rounded_once(const Tensor& a, const Tensor& b, const Tensor& bias) {
  Tensor a16 = rounded(a), b16 = rounded(b);
  const bool a_transposed = stored_transposed(a), b_transposed = stored_transposed(b);
  const bool has_bias = bias.defined();
  std::vector<Tensor> inputs = {a, b};
  if (has_bias) inputs.push_back(bias);
  return record(has_bias ? "linear" : "matmul", inputs, product_of_rounded(a16, b16, bias),
                [a16, b16, a_transposed, b_transposed, has_bias](BackwardContext& c, const Tensor& g) -> Grads {
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
                  if (!has_bias) return {da, db};
                  return {da, db, c.needs(2) ? sum_to(g, c.input_shape(2)) : Tensor()};
                });
}

}  // namespace loom::detail
