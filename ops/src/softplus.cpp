// softplus(x) = log(1 + e^x)                            dx = g * sigmoid(x)
// The kernel computes max(x, 0) + log1p(e^-|x|) (fn::Softplus in
// loom/kernels/functors.h): x for large x, e^x for very negative x, no overflow.
#include "elementwise.h"

namespace loom {

Tensor softplus(const Tensor& x, Where where) {
  CallSite site(where);
  // Checks the dtype, allocates y with x's shape and runs the kernel registered
  // as "softplus" for x's device and dtype (made from loom/kernels/elementwise_ops.h).
  Tensor out = detail::unary_op("softplus", x, detail::DTypes::floating);
  // The backward is written with ops, so it is differentiable again (double backward).
  return record("softplus", {x}, out,
                [x](BackwardContext&, const Tensor& g) -> detail::Grads { return {mul(g, sigmoid(x))}; });
}

LOOM_OP(softplus){
    .name = "softplus",
    .formula = "y = log(1 + e^x)",
    .derivative = "dx = g·sigmoid(x)",
    .shape_rule = "y has x's shape",
    .call = [](const OpArgs& x) { return softplus(x[0]); },
    .samples = {unary_sample({4, 7}),
                unary_sample({2, 3, 5}),
                unary_sample({}, Domain::any, "0-d"),
                {.inputs = {{{4, 7}}},
                 .label = "beta=2 threshold=1",
                 .attributes = {{"beta", 2.0}, {"threshold", 1.0}}}},
    .schema = "softplus(Tensor input, float beta=1, float threshold=20) -> Tensor",
    // As torch's: log(1 + e^(beta x)) / beta, and x itself where beta x > threshold.
    .invoke =
        [](const Arguments& a) {
          const Tensor& x = a.tensor("input");
          const double beta = a.number("beta");
          const Tensor scaled = beta == 1 ? x : mul(x, detail::constant_like(x, beta));
          const Tensor smooth = beta == 1 ? softplus(x) : div(softplus(scaled), detail::constant_like(x, beta));
          return where(gt(scaled, detail::constant_like(x, a.number("threshold"))), x, smooth);
        },
};

}  // namespace loom
