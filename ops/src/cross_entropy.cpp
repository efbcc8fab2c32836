// label_smoothed_cross_entropy(x, t, eps, ignore_index), x = logits [..., V], t int64 [...]:
//   lse_i  = max_i + log(sum_v exp(x_iv - max_i))         (log p_iv = x_iv - lse_i)
//   loss_i = (1 - eps) * (lse_i - x_i,t_i) + eps * (lse_i - mean_v x_iv)
//   loss   = sum of loss_i over rows with t_i != ignore_index, / count   (0 when count = 0)
// (PyTorch's cross_entropy(label_smoothing=eps): eps / V on every class, the target included.)
//   dx = label_smoothed_cross_entropy_backward(x, t, g)
//      = (softmax(x) - ((1 - eps) * onehot(t) + eps / V)) * g / count, zero rows where ignored
// The backward is a primitive (no one-hot is ever materialized); its derivatives, with
// w_i = valid_i / count (a [..., 1] constant):
//   d/dx = softmax_backward(softmax(x), v * g * w)      d/dg = sum(v * backward(x, t, 1))
// All targets ignored: loss 0 and gradient 0 (PyTorch gives NaN from 0 / 0).
// CPU kernels (the targets checked and counted there too): ops/cpu/cross_entropy.cpp.
#include "rows.h"

namespace loom {

namespace {

// The loss's dtype: the logits', or float32 for bfloat16 logits (autocast's rule: the
// loss is summed and read in float32; the logits' gradient is bfloat16 again).
DType loss_dtype(const Tensor& logits) { return logits.dtype() == DType::bf16 ? DType::f32 : logits.dtype(); }

// The arguments checked, as the kernels take them.
kernels::CrossEntropyArgs check_args(std::string_view op, const Tensor& logits, const Tensor& target, double smoothing,
                                     int64_t ignore_index) {
  LOOM_CHECK(is_floating(logits.dtype()), "{}: logits must be float32, float64 or bfloat16, got {}", op,
             dtype_name(logits.dtype()));
  LOOM_CHECK(target.dtype() == DType::i64 && target.device() == logits.device(),
             "{}: target must be int64 class ids on the logits' device ({}), got {} on {}", op, logits.device(),
             dtype_name(target.dtype()), target.device());
  LOOM_CHECK(logits.dim() >= 1 && logits.shape().back() > 0, "{}: logits need a non-empty class dim, got shape {}", op,
             logits.shape());
  Shape rows(logits.shape().begin(), logits.shape().end() - 1);
  LOOM_CHECK(target.shape() == rows, "{}: target has shape {} but logits {} need target shape {}", op, target.shape(),
             logits.shape(), rows);
  LOOM_CHECK(smoothing >= 0.0 && smoothing <= 1.0, "{}: smoothing must be in [0, 1], got {}", op, smoothing);
  return {op, smoothing, ignore_index};
}

// w_i = valid_i / count as a [..., 1] constant of the logits' dtype (0 everywhere when count = 0).
Tensor row_weights(const Tensor& logits, const Tensor& target, int64_t ignore_index) {
  Tensor valid = to_dtype(ne(target, scalar_tensor(ignore_index, {DType::i64, target.device()})), logits.dtype());
  Tensor count = maximum(sum(valid), detail::constant_like(valid, 1.0));
  return unsqueeze(div(valid, count), -1);
}

// The compositions the matrix checks against: log_softmax as x - log(sum(exp(x))), and the smoothed target
// (1 - eps) * onehot(t) + eps / V built with ops (never done by the op; an ignored row's weight is 0).
Tensor smoothed_targets(const Tensor& logits, const Tensor& target, double eps) {
  const int64_t V = logits.shape().back();
  Tensor onehot = to_dtype(eq(unsqueeze(target, -1), arange(V).to(target.device())), logits.dtype());
  return add(mul(onehot, detail::constant_like(logits, 1.0 - eps)), detail::constant_like(logits, eps / V));
}

Tensor lsce_composed(const Tensor& x, const Tensor& target, double eps, int64_t ignore_index = -100) {
  Tensor log_p = sub(x, log(sum(exp(x), {-1}, true)));
  Tensor per_row = neg(sum(mul(log_p, smoothed_targets(x, target, eps)), {-1}, true));
  return sum(mul(per_row, row_weights(x, target, ignore_index)));
}

Tensor lsce_backward_composed(const Tensor& x, const Tensor& target, const Tensor& g, double eps) {
  Tensor p = div(exp(x), sum(exp(x), {-1}, true));
  return mul(sub(p, smoothed_targets(x, target, eps)), mul(g, row_weights(x, target, -100)));
}

// Targets with rows 1 and 3 ignored (ids drawn by the matrix are all in range).
Tensor with_ignored(const Tensor& t) { return masked_fill(t, tensor({0, 1, 0, 1, 0}, DType::b8).to(t.device()), -100); }

}  // namespace

Tensor label_smoothed_cross_entropy(const Tensor& logits, const Tensor& target, double smoothing, int64_t ignore_index,
                                    Where where) {
  CallSite site(where);
  constexpr std::string_view op = "label_smoothed_cross_entropy";
  kernels::CrossEntropyArgs args = check_args(op, logits, target, smoothing, ignore_index);
  Tensor out = Tensor::empty({}, {loss_dtype(logits), logits.device()});
  detail::kernel_for<kernels::CrossEntropyKernel>(op, logits)(out, detail::dense(logits), detail::dense(target), args);
  return record(op, {logits, target}, out,
                [logits, target, smoothing, ignore_index](BackwardContext&, const Tensor& g) -> detail::Grads {
                  return {label_smoothed_cross_entropy_backward(logits, target, g, smoothing, ignore_index), {}};
                });
}

Tensor label_smoothed_cross_entropy_backward(const Tensor& logits, const Tensor& target, const Tensor& grad,
                                             double smoothing, int64_t ignore_index, Where where) {
  CallSite site(where);
  constexpr std::string_view op = "label_smoothed_cross_entropy_backward";
  kernels::CrossEntropyArgs args = check_args(op, logits, target, smoothing, ignore_index);
  LOOM_CHECK(grad.device() == logits.device() && grad.dtype() == loss_dtype(logits),
             "{}: grad must be the loss's dtype {} on the logits' device {}, got {} on {}", op,
             dtype_name(loss_dtype(logits)), logits.device(), dtype_name(grad.dtype()), grad.device());
  LOOM_CHECK(grad.numel() == 1, "{}: grad must hold one value (the loss is a scalar), got shape {}", op, grad.shape());
  Tensor out = Tensor::empty(logits.shape(), {logits.dtype(), logits.device()});
  detail::kernel_for<kernels::CrossEntropyBackwardKernel>(op, logits)(out, detail::dense(logits), detail::dense(target),
                                                                      grad, args);
  return record(op, {logits, target, grad}, out,
                [logits, target, grad, smoothing, ignore_index](BackwardContext& c, const Tensor& v) -> detail::Grads {
                  Tensor dx, dg;
                  // (bfloat16 logits: grad is float32, the loss's dtype; each term in its input's dtype.)
                  if (c.needs(0)) {
                    Tensor weights = mul(reshape(grad, {}), row_weights(logits, target, ignore_index));
                    dx = softmax_backward(softmax(logits), mul(v, to_dtype(weights, logits.dtype())));
                  }
                  if (c.needs(2)) {
                    Tensor one = detail::constant_like(grad, 1.0);
                    Tensor per_unit =
                        label_smoothed_cross_entropy_backward(logits, target, one, smoothing, ignore_index);
                    dg = to_dtype(reshape(sum(mul(v, per_unit)), c.input_shape(2)), grad.dtype());
                  }
                  return {dx, Tensor(), dg};
                });
}

LOOM_OP(label_smoothed_cross_entropy){
    .name = "label_smoothed_cross_entropy",
    .formula = "loss = mean over rows t ≠ ignore of (1-ε)·(lse - x_t) + ε·(lse - mean_v x_v),  lse = log Σ_v exp x_v",
    .derivative = "dx = (softmax(x) - (1-ε)·onehot(t) - ε/V)·g / count,  0 on ignored rows",
    .shape_rule = "x [.., V], t [..] int64 → a scalar",
    .call = [](const OpArgs& x) { return label_smoothed_cross_entropy(x[0], x[1], 0.1); },
    .samples = {{{{{5, 7}}, {{5}, Domain::any, DType::i64, 7}}, {}, "eps=0.1"},
                {{{{2, 3, 6}}, {{2, 3}, Domain::any, DType::i64, 6}},
                 [](const OpArgs& x) { return label_smoothed_cross_entropy(x[0], x[1], 0.0); },
                 "eps=0 [2,3,6]",
                 [](const OpArgs& x) { return lsce_composed(x[0], x[1], 0.0); }},
                {{{{5, 4}}, {{5}, Domain::any, DType::i64, 4}},
                 [](const OpArgs& x) { return label_smoothed_cross_entropy(x[0], with_ignored(x[1]), 0.2); },
                 "eps=0.2, rows 1,3 ignored",
                 [](const OpArgs& x) { return lsce_composed(x[0], with_ignored(x[1]), 0.2); }}},
    .composed = [](const OpArgs& x) { return lsce_composed(x[0], x[1], 0.1); },
};

LOOM_OP(label_smoothed_cross_entropy_backward){
    .name = "label_smoothed_cross_entropy_backward",
    .formula = "dx = (softmax(x) - (1-ε)·onehot(t) - ε/V)·g·w,  w = [t ≠ ignore] / count",
    .derivative = "d/dx = softmax_backward(softmax(x), v·g·w);  d/dg = Σ v·backward(x, t, 1)",
    .shape_rule = "x [.., V], t [..], g scalar → x's shape",
    .call = [](const OpArgs& x) { return label_smoothed_cross_entropy_backward(x[0], x[1], x[2], 0.1); },
    .samples = {{{{{5, 7}}, {{5}, Domain::any, DType::i64, 7}, {{}}}, {}, "eps=0.1"}},
    .composed = [](const OpArgs& x) { return lsce_backward_composed(x[0], x[1], x[2], 0.1); },
};

}  // namespace loom
