#pragma once
// Elementwise math, comparisons and selection. Each op is defined, with its
// derivative and its gradient-check samples, in ops/src/<op>.cpp (comparisons
// share ops/src/compare.cpp). Binary ops broadcast like NumPy/PyTorch and never
// cast: both operands have one dtype. Included by loom/ops.h.
#include <source_location>

#include "loom/tensor.h"

namespace loom {

// ---- unary math ----
Tensor sqrt(const Tensor& x, Where where = Where::current());
// 1 / sqrt(x)
Tensor rsqrt(const Tensor& x, Where where = Where::current());
Tensor abs(const Tensor& x, Where where = Where::current());
// -1, 0 or 1 (abs's derivative; no gradient of its own).
Tensor sign(const Tensor& x, Where where = Where::current());
// 1 / (1 + e^-x)
Tensor sigmoid(const Tensor& x, Where where = Where::current());
// grad * y * (1 - y) (sigmoid's derivative in terms of its output y).
Tensor sigmoid_backward(const Tensor& y, const Tensor& grad, Where where = Where::current());
// log(1 + e^x), computed without overflow (a smooth relu; derivative sigmoid(x)).
Tensor softplus(const Tensor& x, Where where = Where::current());
// x * Phi(x) with Phi the standard normal CDF (the exact erf form).
Tensor gelu(const Tensor& x, Where where = Where::current());
// grad * (Phi(x) + x * phi(x)) (gelu's derivative in terms of its input x).
Tensor gelu_backward(const Tensor& x, const Tensor& grad, Where where = Where::current());
// PyTorch's gelu(x, approximate=...): none is the exact form above, tanh is gelu_tanh.
enum class GeluApproximate { none, tanh };
Tensor gelu(const Tensor& x, GeluApproximate approximate, Where where = Where::current());
// x/2 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3))) (gelu's tanh approximation).
Tensor gelu_tanh(const Tensor& x, Where where = Where::current());
// grad * gelu_tanh'(x).
Tensor gelu_tanh_backward(const Tensor& x, const Tensor& grad, Where where = Where::current());
// min(max(x, min), max); an error when min > max.
Tensor clamp(const Tensor& x, double min, double max, Where where = Where::current());

// ---- binary math, broadcasting; ties split the gradient 1/2 : 1/2 ----
Tensor maximum(const Tensor& a, const Tensor& b, Where where = Where::current());
Tensor minimum(const Tensor& a, const Tensor& b, Where where = Where::current());

// ---- comparisons, broadcasting: bool results, no gradient ----
Tensor eq(const Tensor& a, const Tensor& b, Where where = Where::current());
Tensor ne(const Tensor& a, const Tensor& b, Where where = Where::current());
Tensor lt(const Tensor& a, const Tensor& b, Where where = Where::current());
Tensor le(const Tensor& a, const Tensor& b, Where where = Where::current());
Tensor gt(const Tensor& a, const Tensor& b, Where where = Where::current());
Tensor ge(const Tensor& a, const Tensor& b, Where where = Where::current());

// ---- selection ----
// cond ? a : b elementwise; cond is bool; all three broadcast together.
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b, Where where = Where::current());
// x with `value` where mask is true; mask is bool and broadcasts to x's shape.
Tensor masked_fill(const Tensor& x, const Tensor& mask, double value, Where where = Where::current());

}  // namespace loom
