// gelu(x) = x * Phi(x) = x/2 * (1 + erf(x / sqrt 2))     (exact form, PyTorch's default)
//                                       dx = g * (Phi(x) + x * phi(x)),  phi(x) = e^(-x^2/2) / sqrt(2 pi)
// float32 fast kernels take a vectorizable Phi (kernels/vec_math.h: max relative
// error ~4e-7 over [-10, 10], no cancellation for negative x; ops/cpu/gelu_span.cpp)
// and share one exp between Phi and phi in the backward; float64 and the
// reference kernels keep libm's erf.
#include "elementwise.h"

namespace loom {

constexpr double kInvSqrt2Pi = 0.39894228040143267794;  // 1 / sqrt(2 pi)

Tensor gelu(const Tensor& x, Where where) {
  CallSite site(where);
  Tensor out = detail::unary_op("gelu", x, detail::DTypes::floating);
  return record("gelu", {x}, out,
                [x](BackwardContext&, const Tensor& g) -> detail::Grads { return {gelu_backward(x, g)}; });
}

// gelu_backward(x, g) = g * gelu'(x): one fused kernel for the backward pass,
// itself differentiable (double backward):
//   d/dx = g * gelu''(x) = g * phi(x) * (2 - x^2)     (phi' = -x phi)
//   d/dg = gelu'(x) = gelu_backward(x, 1)
// The second derivative is rarely on a hot path, so it is composed from ops.
Tensor gelu_backward(const Tensor& x, const Tensor& grad, Where where) {
  CallSite site(where);
  Tensor out = detail::binary_op("gelu_backward", x, grad, detail::DTypes::floating);
  return record("gelu_backward", {x, grad}, out, [x, grad](BackwardContext& c, const Tensor& g) -> detail::Grads {
    Tensor gx, gg;
    if (c.needs(0)) {
      Tensor x2 = mul(x, x);
      Tensor pdf = mul(exp(mul(x2, detail::constant_like(x, -0.5))), detail::constant_like(x, kInvSqrt2Pi));
      Tensor second = mul(pdf, sub(detail::constant_like(x, 2.0), x2));
      gx = sum_to(mul(mul(g, grad), second), c.input_shape(0));
    }
    if (c.needs(1)) gg = sum_to(gelu_backward(x, g), c.input_shape(1));
    return {gx, gg};
  });
}

LOOM_OP(gelu){
    .name = "gelu",
    .formula = "y = x·Φ(x) = x/2·(1 + erf(x/√2))",
    .derivative = "dx = g·(Φ(x) + x·φ(x)),  φ(x) = e^(-x²/2)/√(2π)",
    .shape_rule = "y has x's shape",
    .call = [](const OpArgs& x) { return gelu(x[0]); },
    .samples = {unary_sample({4, 7}), unary_sample({2, 3, 5}), unary_sample({}, Domain::any, "0-d")},
    .schema = "gelu(Tensor input, *, str approximate='none') -> Tensor",
    .invoke =
        [](const Arguments& a) {
          const std::string& approximate = a.text("approximate");
          LOOM_CHECK(approximate == "none" || approximate == "tanh",
                     "gelu: approximate must be 'none' or 'tanh', got '{}'", approximate);
          return approximate == "tanh" ? gelu_tanh(a.tensor("input")) : gelu(a.tensor("input"));
        },
};

LOOM_OP(gelu_backward){
    .name = "gelu_backward",
    .formula = "dx = g·(Φ(x) + x·φ(x))",
    .derivative = "d/dx = v·g·φ(x)·(2 - x²);  d/dg = v·(Φ(x) + x·φ(x))",
    .shape_rule = "broadcast(x.shape, g.shape)",
    .call = [](const OpArgs& x) { return gelu_backward(x[0], x[1]); },
    .samples = {binary_sample({4, 7}, {4, 7}), binary_sample({4, 7}, {7}, Domain::any, "row broadcast"),
                binary_sample({3, 1}, {2, 1, 5}, Domain::any, "both broadcast")},
};

}  // namespace loom
