// gelu_tanh(x) = x/2 * (1 + tanh(u)),  u = sqrt(2/pi) * (x + 0.044715 x^3)
//                                 dx = g * ((1 + t)/2 + x/2 * (1 - t^2) * u'),  t = tanh(u)
// The tanh approximation of gelu (PyTorch's approximate='tanh', BERT's and
// GPT-2's form); gelu(x, GeluApproximate::tanh) calls it. Kernels: fn::GeluTanh
// and fn::GeluTanhBackward in loom/kernels/functors.h, on every device.
#include "elementwise.h"

namespace loom {

namespace {
constexpr double kSqrt2OverPi = 0.79788456080286535588;  // sqrt(2 / pi)
constexpr double kCubic = 0.044715;
}  // namespace

Tensor gelu(const Tensor& x, GeluApproximate approximate, Where where) {
  return approximate == GeluApproximate::tanh ? gelu_tanh(x, where) : gelu(x, where);
}

Tensor gelu_tanh(const Tensor& x, Where where) {
  CallSite site(where);
  Tensor out = detail::unary_op("gelu_tanh", x, detail::DTypes::floating);
  return record("gelu_tanh", {x}, out,
                [x](BackwardContext&, const Tensor& g) -> detail::Grads { return {gelu_tanh_backward(x, g)}; });
}

// gelu_tanh_backward(x, g) = g * y'(x), differentiable again (composed from ops):
//   d/dx = g * y''(x) = g * (1 - t^2) * (u' + x/2 * (u'' - 2 t u'^2)),  u'' = 6 * 0.044715 * sqrt(2/pi) * x
//   d/dg = y'(x) = gelu_tanh_backward(x, 1)
Tensor gelu_tanh_backward(const Tensor& x, const Tensor& grad, Where where) {
  CallSite site(where);
  Tensor out = detail::binary_op("gelu_tanh_backward", x, grad, detail::DTypes::floating);
  return record("gelu_tanh_backward", {x, grad}, out, [x, grad](BackwardContext& c, const Tensor& g) -> detail::Grads {
    Tensor gx, gg;
    if (c.needs(0)) {
      auto k = [&](double v) { return detail::constant_like(x, v); };
      Tensor x2 = mul(x, x);
      Tensor t = tanh(mul(k(kSqrt2OverPi), add(x, mul(k(kCubic), mul(x2, x)))));
      Tensor du = mul(k(kSqrt2OverPi), add(k(1.0), mul(k(3 * kCubic), x2)));
      Tensor ddu = mul(k(6 * kCubic * kSqrt2OverPi), x);
      Tensor bend = mul(mul(k(0.5), x), sub(ddu, mul(mul(k(2.0), t), mul(du, du))));
      Tensor second = mul(sub(k(1.0), mul(t, t)), add(du, bend));
      gx = sum_to(mul(mul(g, grad), second), c.input_shape(0));
    }
    if (c.needs(1)) gg = sum_to(gelu_tanh_backward(x, g), c.input_shape(1));
    return {gx, gg};
  });
}

LOOM_OP(gelu_tanh){
    .name = "gelu_tanh",
    .formula = "y = x/2·(1 + tanh(u)),  u = √(2/π)·(x + 0.044715·x³)",
    .derivative = "dx = g·((1 + t)/2 + x/2·(1 - t²)·u'),  t = tanh(u),  u' = √(2/π)·(1 + 3·0.044715·x²)",
    .shape_rule = "y has x's shape",
    .call = [](const OpArgs& x) { return gelu_tanh(x[0]); },
    .samples = {unary_sample({4, 7}), unary_sample({2, 3, 5}), unary_sample({}, Domain::any, "0-d")},
};

LOOM_OP(gelu_tanh_backward){
    .name = "gelu_tanh_backward",
    .formula = "dx = g·((1 + t)/2 + x/2·(1 - t²)·u')",
    .derivative = "d/dx = v·g·(1 - t²)·(u' + x/2·(u'' - 2t·u'²));  d/dg = v·((1 + t)/2 + x/2·(1 - t²)·u')",
    .shape_rule = "broadcast(x.shape, g.shape)",
    .call = [](const OpArgs& x) { return gelu_tanh_backward(x[0], x[1]); },
    .samples = {binary_sample({4, 7}, {4, 7}), binary_sample({4, 7}, {7}, Domain::any, "row broadcast")},
};

}  // namespace loom
