#pragma once
// Shared plumbing for elementwise ops: argument checks, output allocation and
// dtype dispatch, then the loop engine (fast) or the plain loop (reference).
#include "loom/autograd.h"
#include "loom/kernels/functors.h"
#include "loom/kernels/loops.h"
#include "loom/ops.h"
#include "loom/registry.h"

namespace loom::detail {

using Grads = std::vector<Tensor>;

// Ops on CPU only until cuda/ registers kernels; the error says so plainly.
inline void require_cpu(std::string_view op, const Tensor& t) {
  LOOM_CHECK(t.device().is_cpu(), "{}: no kernel for device {} in this build", op, t.device());
}

// Both operands on one device and of one dtype: loom never casts silently.
inline void check_same_kind(std::string_view op, const Tensor& a, const Tensor& b) {
  LOOM_CHECK(a.device() == b.device(), "{}: operands are on different devices ({} of shape {} and {} of shape {})",
             op, a.device(), a.shape(), b.device(), b.shape());
  LOOM_CHECK(a.dtype() == b.dtype(),
             "{}: operands have different dtypes ({} of shape {} and {} of shape {}); cast one with to_dtype", op,
             dtype_name(a.dtype()), a.shape(), dtype_name(b.dtype()), b.shape());
}

// f runs in the fast loop, ref in the reference loop: the same functor for most
// ops, a plain libm one where the fast functor approximates (gelu).
template <typename F, typename R, typename Dispatch>
Tensor unary_map(std::string_view op, const Tensor& x, F f, R ref, Dispatch dispatch) {
  require_cpu(op, x);
  Tensor out = Tensor::empty(x.shape(), {x.dtype(), x.device()});
  dispatch(x.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (kernel_mode() == KernelMode::reference) kernels::reference_unary<T, T>(out, x, ref);
    else kernels::unary_loop<T, T>(out, x, f);
  });
  return out;
}

inline constexpr auto kFloating = [](DType t, std::string_view name, auto&& fn) { dispatch_floating(t, name, fn); };
inline constexpr auto kNumeric = [](DType t, std::string_view name, auto&& fn) { dispatch_numeric(t, name, fn); };

// Floating unary math (exp, log, tanh...).
template <typename F>
Tensor unary_float(std::string_view op, const Tensor& x, F f = {}) {
  return unary_map(op, x, f, f, kFloating);
}
// The same with a separate reference functor.
template <typename Fast, typename Reference>
Tensor unary_float_with_reference(std::string_view op, const Tensor& x) {
  return unary_map(op, x, Fast{}, Reference{}, kFloating);
}
// Numeric unary math (neg, relu...), ints included.
template <typename F>
Tensor unary_numeric(std::string_view op, const Tensor& x, F f = {}) {
  return unary_map(op, x, f, f, kNumeric);
}

template <typename F, typename R, typename Dispatch>
Tensor binary_map(std::string_view op, const Tensor& a, const Tensor& b, F f, R ref, Dispatch dispatch) {
  check_same_kind(op, a, b);
  require_cpu(op, a);
  Shape shape = kernels::broadcast_shapes(a.shape(), b.shape(), op);
  Tensor out = Tensor::empty(shape, {a.dtype(), a.device()});
  dispatch(a.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (kernel_mode() == KernelMode::reference) kernels::reference_binary<T, T>(out, a, b, ref);
    else kernels::binary_loop<T, T>(out, a, b, f);
  });
  return out;
}

// Numeric binary math (add, mul, maximum...), ints included.
template <typename F>
Tensor binary_numeric(std::string_view op, const Tensor& a, const Tensor& b, F f = {}) {
  return binary_map(op, a, b, f, f, kNumeric);
}
// Floating binary math (gelu_backward, sigmoid_backward...).
template <typename F>
Tensor binary_float(std::string_view op, const Tensor& a, const Tensor& b, F f = {}) {
  return binary_map(op, a, b, f, f, kFloating);
}
// The same with a separate reference functor.
template <typename Fast, typename Reference>
Tensor binary_float_with_reference(std::string_view op, const Tensor& a, const Tensor& b) {
  return binary_map(op, a, b, Fast{}, Reference{}, kFloating);
}

// Comparisons (eq, lt...): operands of one dtype (bool included), a bool result.
template <typename F>
Tensor binary_compare(std::string_view op, const Tensor& a, const Tensor& b, F f = {}) {
  check_same_kind(op, a, b);
  require_cpu(op, a);
  Shape shape = kernels::broadcast_shapes(a.shape(), b.shape(), op);
  Tensor out = Tensor::empty(shape, {DType::b8, a.device()});
  dispatch_all(a.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (kernel_mode() == KernelMode::reference) kernels::reference_binary<T, bool>(out, a, b, f);
    else kernels::binary_loop<T, bool>(out, a, b, f);
  });
  return out;
}

// A 0-d tensor holding `value` with t's dtype and device (for scalars in backward formulas).
inline Tensor constant_like(const Tensor& t, double value) { return scalar_tensor(value, {t.dtype(), t.device()}); }

}  // namespace loom::detail
