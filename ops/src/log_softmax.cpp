// log_softmax(x, dim, mask) over `dim`, with z = x + mask (z = -inf where a bool mask is true):
//   y_i = (z_i - max z) - log(sum_j exp(z_j - max z))
//   dx = log_softmax_backward(y, g) = valid * (g - exp(y) * sum(valid * g))
// where valid = (y != -inf): a masked entry's output is the constant -inf, so it
// passes no gradient (and a fully masked row, all -inf, has gradient 0, not NaN).
// log_softmax_backward(y, g) is a primitive; its derivatives, written with ops:
//   d/dg = valid * (v - sum(v * exp(y)))     d/dy = -v * exp(y) * sum(valid * g)
// Any dim: the kernel runs over the last dim; another dim is transposed there and back.
// CPU kernels: ops/cpu/log_softmax.cpp.
#include "rows.h"

namespace loom {

namespace {

Tensor log_softmax_last(const Tensor& x, const Tensor& mask) {
  Tensor out = detail::masked_rows("log_softmax", x, mask);
  Shape mask_shape = mask.defined() ? mask.shape() : Shape{};
  return record(
      "log_softmax", {x, mask}, out,
      [mask_shape](BackwardContext& c, const Tensor& g) -> detail::Grads {
        Tensor dx = log_softmax_backward(c.out(), g);
        return {c.needs(0) ? dx : Tensor(), c.needs(1) ? sum_to(dx, mask_shape) : Tensor()};
      },
      SavedOutput::yes);
}

}  // namespace

Tensor log_softmax(const Tensor& x, int64_t dim, const Tensor& mask, Where where) {
  CallSite site(where);
  return detail::along_dim("log_softmax", x, dim, mask, log_softmax_last);
}

Tensor log_softmax_backward(const Tensor& y, const Tensor& grad, Where where) {
  CallSite site(where);
  Tensor out = detail::row_backward("log_softmax_backward", y, grad);
  return record("log_softmax_backward", {y, grad}, out,
                [y, grad](BackwardContext& c, const Tensor& v) -> detail::Grads {
                  // 1 where y is a real log-probability, 0 where it is -inf (masked).
                  Tensor valid;
                  {
                    NoGradGuard no_grad;
                    Tensor minus_inf = detail::constant_like(y, -std::numeric_limits<double>::infinity());
                    valid = to_dtype(ne(y.detach(), minus_inf), y.dtype());
                  }
                  auto masked = [&](const Tensor& t) { return mul(t, valid); };
                  Tensor p = exp(y);
                  Tensor dy, dg;
                  if (c.needs(0)) dy = neg(mul(mul(v, p), sum(masked(grad), {-1}, true)));
                  if (c.needs(1)) dg = masked(sub(v, sum(mul(v, p), {-1}, true)));
                  return {dy, dg};
                });
}

namespace {
Tensor log_softmax_composed(const Tensor& z, int64_t dim) { return sub(z, log(sum(exp(z), {dim}, true))); }
}  // namespace

LOOM_OP(log_softmax){
    .name = "log_softmax",
    .formula = "y = z - max z - log Σ exp(z - max z),  z = x + mask   (over dim)",
    .derivative = "dx = g - exp(y)·Σ g   (0 at masked entries)",
    .shape_rule = "y has x's shape",
    .call = [](const OpArgs& x) { return log_softmax(x[0]); },
    .samples = {{.inputs = {{{4, 7}}}, .label = "dim=-1", .attributes = {{"dim", int64_t{-1}}}},
                {.inputs = {{{2, 3, 5}}}, .label = "dim=-1", .attributes = {{"dim", int64_t{-1}}}},
                {.inputs = {{{2, 5, 3}}},
                 .label = "dim=0",
                 .composed = [](const OpArgs& x) { return log_softmax_composed(x[0], 0); },
                 .attributes = {{"dim", int64_t{0}}}},
                {.inputs = {{{3, 4, 5}}, {{4, 5}}},
                 .label = "additive mask [4,5]",
                 .composed = [](const OpArgs& x) { return log_softmax_composed(add(x[0], x[1]), -1); },
                 .attributes = {{"dim", int64_t{-1}}}}},
    .composed = [](const OpArgs& x) { return log_softmax_composed(x[0], -1); },
    .schema = "log_softmax(Tensor input, int dim, *, Tensor? mask=None) -> Tensor",
    .invoke =
        [](const Arguments& a) { return log_softmax(a.tensor("input"), a.integer("dim"), a.optional_tensor("mask")); },
};

// y drawn as real log-probabilities would be log_softmax(...); the formula is
// checked for any y (it is smooth in y and linear in g).
LOOM_OP(log_softmax_backward){
    .name = "log_softmax_backward",
    .formula = "dx = valid·(g - exp(y)·Σ valid·g),  valid = [y ≠ -∞]",
    .derivative = "d/dg = valid·(v - Σ v·exp(y));  d/dy = -v·exp(y)·Σ valid·g",
    .shape_rule = "y's shape",
    .call = [](const OpArgs& x) { return log_softmax_backward(x[0], x[1]); },
    .samples = {binary_sample({4, 7}, {4, 7}), binary_sample({2, 3, 5}, {2, 3, 5})},
    .composed = [](const OpArgs& x) { return sub(x[1], mul(exp(x[0]), sum(x[1], {-1}, true))); },
};

}  // namespace loom
