// linear(x, W, b) = x Wᵀ + b: a Linear layer, x [.., in], W [out, in], b [out]
//   dx = g W,   dW = gᵀ x (x's rows as one matrix),   db = Σ_rows g
// Fused: the CPU kernel adds b to each block of the product as soon as its gemm
// (or decoding's packed kernel) has written it, while the block is in cache: no
// second pass over memory, no second op. Each element is the product's sum plus
// b, rounded once, as add(matmul(x, Wᵀ), b) computes it, so the bits are the
// same; in bf16 precision for training, the product of operands rounded once
// (ops/cpu/matmul_rounded_once.h) takes the bias the same way. Where no fused
// kernel applies (a device without one) the op is that composition. The backward is
// written with ops, as the composition's, so it gives the same gradients and is
// differentiable again; where a device computes dW and db in one product
// (linear_param_grads' kernel: cuBLASLt's bias-gradient epilogue) it takes them from there. Kernels: ops/cpu/matmul.cpp.
#include "linear_grads.h"
#include "matmul_rounded_once.h"
#include "rows.h"

namespace loom {

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias, Where where) {
  CallSite site(where);
  detail::check_same_kind("linear", x, weight);
  LOOM_CHECK(weight.dim() == 2 && x.dim() >= 1 && x.shape().back() == weight.shape()[1],
             "linear: x [.., in] and weight [out, in] do not fit: x {} and weight {}", x.shape(), weight.shape());
  const int64_t in = weight.shape()[1], out = weight.shape()[0];
  Shape out_shape = x.shape();
  out_shape.back() = out;
  // [.., in] as one [rows, in] matrix: a single gemm, Wᵀ folded into the call.
  const Tensor rows = x.reshape({x.numel() / in, in}), w_t = transpose(weight, 0, 1);
  if (!bias.defined()) return matmul(rows, w_t).reshape(out_shape);
  detail::check_same_kind("linear", x, bias);
  LOOM_CHECK(bias.dim() == 1 && bias.shape()[0] == out, "linear: bias must be [{}] for weight {}, got {}", out,
             weight.shape(), bias.shape());
  if (detail::rounds_once(rows, w_t))
    return detail::matmul_rounded_once(rows, w_t, detail::dense(bias)).reshape(out_shape);
  if (!supports("linear", x.device(), x.dtype())) return add(matmul(rows, w_t), bias).reshape(out_shape);
  Tensor y = Tensor::empty({rows.shape()[0], out}, {x.dtype(), x.device()});
  detail::kernel_for<kernels::LinearKernel>("linear", x)(y, rows, w_t, detail::dense(bias));
  y = record("linear", {rows, weight, bias}, y, [rows, weight](BackwardContext& c, const Tensor& g) -> detail::Grads {
    Tensor dx = c.needs(0) ? matmul(g, weight) : Tensor();
    if (c.needs(1) && c.needs(2) && detail::fused_linear_param_grads(g)) {  // dW and db from one product
      const int64_t out = weight.shape()[0], in = weight.shape()[1];
      const Tensor params = linear_param_grads(g, rows);
      return {dx, params.narrow(0, 0, out * in).reshape({out, in}), params.narrow(0, out * in, out)};
    }
    // Laid out as matmul's backward lays them out for x @ weight.t(), so the bits agree.
    return {dx, c.needs(1) ? matmul(transpose(g, 0, 1), rows) : Tensor(),
            c.needs(2) ? sum_to(g, c.input_shape(2)) : Tensor()};
  });
  return y.reshape(out_shape);
}

LOOM_OP(linear){
    .name = "linear",
    .formula = "y = x Wᵀ + b   (a Linear layer)",
    .derivative = "dx = g W;  dW = gᵀ x  (x's rows as one matrix);  db = Σ_rows g",
    .shape_rule = "x [.., in], W [out, in], b [out] → [.., out]",
    .call = [](const OpArgs& a) { return linear(a[0], a[1], a[2]); },
    .samples = {{{{{3, 4}}, {{5, 4}}, {{5}}}, {}, "2-D"},
                {{{{2, 3, 4}}, {{5, 4}}, {{5}}}, {}, "a batch of sequences"},
                {{{{4}}, {{5, 4}}, {{5}}}, {}, "one vector"},
                {{{{6, 33}}, {{40, 33}}, {{40}}}, {}, "out=40 (blocks of 16), odd in"}},
    .composed = [](const OpArgs& a) { return add(matmul(a[0], transpose(a[1], 0, 1)), a[2]); },
    .schema = "linear(Tensor input, Tensor weight, Tensor? bias=None) -> Tensor",
    .invoke =
        [](const Arguments& a) { return linear(a.tensor("input"), a.tensor("weight"), a.optional_tensor("bias")); },
};

}  // namespace loom
