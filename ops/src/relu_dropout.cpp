// relu_dropout(x, p, train, gen) = dropout(relu(x), p, train, gen) in one pass:
//   y_i = keep_i * max(x_i, 0) / (1 - p)
//   dx = relu_dropout_backward(x, g, mask, p) = keep * [x > 0] * g / (1 - p)
// The feed-forward's ReLU and the dropout after it (nn::PositionwiseFeedForward).
// Apart, relu writes relu(x) and dropout reads it back, and the backward writes
// dropout's gradient for relu_backward to read back: the widest tensors of a
// Transformer step, twice each way. It draws what dropout draws (one generator
// offset, the same keep bits) and computes the same products, so it gives relu then
// dropout's bits. !train or p == 0: relu(x).
// CPU kernels: ops/cpu/dropout.cpp (dropout's, with max(x, 0) in place of x).
#include "dropout_support.h"

namespace loom {

Tensor relu_dropout(const Tensor& x, double p, bool train, Generator& gen, Where where) {
  CallSite site(where);
  detail::check_dropout_input("relu_dropout", x, p);
  if (!train || p == 0.0) return relu(x);
  uint64_t seed = gen.seed(), offset = gen.next_offset();
  Tensor out = Tensor::empty(x.shape(), {x.dtype(), x.device()});
  Tensor mask = Tensor::empty({kernels::dropout_mask_words(x.numel())}, {DType::i32, x.device()});
  Tensor xd = detail::dense(x);
  detail::kernel_for<kernels::DropoutKernel>("relu_dropout", x)(out, mask, xd, kernels::DropoutDraw{p, seed, offset});
  return record("relu_dropout", {x}, out, [xd, mask, p](BackwardContext&, const Tensor& g) -> detail::Grads {
    return {relu_dropout_backward(xd, g, mask, p)};
  });
}

// Linear in g and piecewise constant in x (like relu_backward):
//   d/dg = relu_dropout_backward(x, v, mask, p),   d/dx = 0.
Tensor relu_dropout_backward(const Tensor& x, const Tensor& grad, const Tensor& mask, double p, Where where) {
  CallSite site(where);
  detail::check_dropout_input("relu_dropout_backward", grad, p);
  detail::check_same_kind("relu_dropout_backward", x, grad);
  LOOM_CHECK(x.shape() == grad.shape(), "relu_dropout_backward: x has shape {} but grad has shape {}", x.shape(),
             grad.shape());
  detail::check_dropout_mask("relu_dropout_backward", mask, grad);
  Tensor xd = detail::dense(x), md = detail::dense(mask);
  Tensor out = Tensor::empty(grad.shape(), {grad.dtype(), grad.device()});
  detail::kernel_for<kernels::ReluDropoutBackwardKernel>("relu_dropout_backward", grad)(out, xd, detail::dense(grad),
                                                                                        md, p);
  return record("relu_dropout_backward", {x, grad}, out, [xd, md, p](BackwardContext& c, const Tensor& v) {
    return detail::Grads{c.needs(0) ? zeros(c.input_shape(0), {xd.dtype(), xd.device()}) : Tensor(),
                         c.needs(1) ? relu_dropout_backward(xd, v, md, p) : Tensor()};
  });
}

namespace {
// A fresh generator per call, as detail::dropout_fixed.
Tensor relu_dropout_fixed(const Tensor& x, double p) {
  Generator gen(1234);
  return relu_dropout(x, p, true, gen);
}
}  // namespace

// x away from relu's kink: finite differences must not cross 0.
LOOM_OP(relu_dropout){
    .name = "relu_dropout",
    .formula = "y = keep·max(x, 0) / (1-p),  keep = [u ≥ p] (dropout's draws)",
    .derivative = "dx = relu_dropout_backward(x, g, mask, p) = keep·[x > 0]·g / (1-p)",
    .shape_rule = "y has x's shape",
    .call = [](const OpArgs& x) { return relu_dropout_fixed(x[0], 0.3); },
    .samples = {unary_sample({4, 7}, Domain::away_from_zero, "[4,7] p=0.3"),
                unary_sample({2, 3, 45}, Domain::away_from_zero, "[2,3,45] p=0.3")},
    .composed = [](const OpArgs& x) { return detail::dropout_fixed(relu(x[0]), 0.3); },
};

LOOM_OP(relu_dropout_backward){
    .name = "relu_dropout_backward",
    .formula = "dx = keep·[x > 0]·g / (1-p),  keep read from the forward's bitmask",
    .derivative = "d/dg = relu_dropout_backward(x, v, mask, p);  d/dx = 0",
    .shape_rule = "g's shape (x's too); mask int32 [⌈n/32⌉]",
    .call = [](const OpArgs& x) { return relu_dropout_backward(x[0], x[1], x[2], 0.3); },
    .samples = {{{{{4, 7}, Domain::away_from_zero}, {{4, 7}}, detail::dropout_mask_sample(28)}, {}, "[4,7] p=0.3"},
                {{{{5, 13}, Domain::away_from_zero}, {{5, 13}}, detail::dropout_mask_sample(65)}, {}, "[5,13] p=0.3"}},
    .composed = [](const OpArgs& x) { return relu_backward(x[0], dropout_backward(x[1], x[2], 0.3)); },
};

}  // namespace loom
