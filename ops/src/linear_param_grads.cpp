// [dW; db] = linear_param_grads(g, x): a linear op's parameter gradients, flat
//   dW = gᵀ x  ([N, K], row-major),  db = Σ_rows g  ([N]),  for g [M, N], x [M, K]
// For an upstream v = [v_W; v_b] (dW is linear in g and in x, db in g):
//   d/dg = x v_Wᵀ + v_b = linear(x, v_W, v_b),   d/dx = g v_W
// One flat output so that one kernel can write both: on CUDA one cuBLASLt product
// whose bias-gradient epilogue sums g's rows as it reads them (no second pass over g).
// A device without a kernel composes it. linear's backward calls it where a device's
// kernel is faster than matmul and sum_to (detail::fused_linear_param_grads: not the
// CPU's, the reference). Kernels: ops/cpu/linear_param_grads.cpp, cuda/src/matmul.cpp.
#include "linear_grads.h"
#include "loom/matmul_precision.h"
#include "rows.h"

namespace loom {

namespace {

Tensor composed_param_grads(const Tensor& g, const Tensor& x) {
  return cat({matmul(transpose(g, 0, 1), x).reshape({-1}), sum_to(g, {g.shape()[1]})}, 0);
}

}  // namespace

namespace detail {
bool fused_linear_param_grads(const Tensor& g) {
  if (g.device().type == DeviceType::cpu) return false;
  if (g.dtype() == DType::f32 && matmul_precision() == MatmulPrecision::bf16) return false;
  return supports("linear_param_grads", g.device(), g.dtype());
}
}  // namespace detail

Tensor linear_param_grads(const Tensor& g, const Tensor& x, Where where) {
  CallSite site(where);
  detail::check_same_kind("linear_param_grads", g, x);
  LOOM_CHECK(g.dim() == 2 && x.dim() == 2 && g.shape()[0] == x.shape()[0],
             "linear_param_grads: g [M, N] and x [M, K] must share their rows: g {} and x {}", g.shape(), x.shape());
  LOOM_CHECK(is_floating(g.dtype()), "linear_param_grads: expected a floating dtype, got {}", dtype_name(g.dtype()));
  if (!supports("linear_param_grads", g.device(), g.dtype())) return composed_param_grads(g, x);
  const int64_t n = g.shape()[1], k = x.shape()[1];
  Tensor out = Tensor::empty({n * k + n}, {g.dtype(), g.device()});
  detail::kernel_for<kernels::LinearParamGradsKernel>("linear_param_grads", g)(out, detail::dense(g), detail::dense(x));
  return record("linear_param_grads", {g, x}, out, [g, x, n, k](BackwardContext& c, const Tensor& v) -> detail::Grads {
    const Tensor vw = v.narrow(0, 0, n * k).reshape({n, k}), vb = v.narrow(0, n * k, n);
    return {c.needs(0) ? linear(x, vw, vb) : Tensor(), c.needs(1) ? matmul(g, vw) : Tensor()};
  });
}

LOOM_OP(linear_param_grads){
    .name = "linear_param_grads",
    .formula = "[dW; db] = [gᵀ x; Σ_rows g]   (flat: N·K + N)",
    .derivative = "d/dg = x v_Wᵀ + v_b = linear(x, v_W, v_b);  d/dx = g v_W",
    .shape_rule = "g [M, N], x [M, K] → [N·K + N]",
    .call = [](const OpArgs& a) { return linear_param_grads(a[0], a[1]); },
    .samples = {{{{{3, 5}}, {{3, 4}}}, {}, "M=3, N=5, K=4"},
                {{{{1, 2}}, {{1, 7}}}, {}, "one row"},
                {{{{9, 40}}, {{9, 33}}}, {}, "N=40, odd K"}},
    .composed = [](const OpArgs& a) { return composed_param_grads(a[0], a[1]); },
};

}  // namespace loom
