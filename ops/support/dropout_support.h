#pragma once
// What dropout and relu_dropout (ops/src) share: their input and bitmask checks, and
// their registrations' sample helpers.
#include "rows.h"

namespace loom::detail {

inline void check_dropout_input(std::string_view op, const Tensor& x, double p) {
  LOOM_CHECK(is_floating(x.dtype()), "{}: expected float32, float64 or bfloat16, got {}", op, dtype_name(x.dtype()));
  LOOM_CHECK(p >= 0.0 && p <= 1.0, "{}: p must be in [0, 1], got {}", op, p);
}

// `mask` must be the forward's int32 bitmask for grad's elements, on grad's device.
inline void check_dropout_mask(std::string_view op, const Tensor& mask, const Tensor& grad) {
  const int64_t words = kernels::dropout_mask_words(grad.numel());
  LOOM_CHECK(mask.dtype() == DType::i32 && mask.device() == grad.device() && mask.numel() == words,
             "{}: mask must be the int32 bitmask of {} elements ({} words on {}), got {} {} on {}", op, grad.numel(),
             words, grad.device(), mask.numel(), dtype_name(mask.dtype()), mask.device());
}

// ---- sample helpers for the registrations ----
// dropout(x, p) with a fresh generator per call: the same mask on every evaluation
// (finite differences).
inline Tensor dropout_fixed(const Tensor& x, double p) {
  Generator gen(1234);
  return dropout(x, p, true, gen);
}

// A dropout bitmask input for `elements` elements: any 32-bit pattern per word
// ([0, 2^32) wraps into int32).
inline InputSpec dropout_mask_sample(int64_t elements) {
  return {{kernels::dropout_mask_words(elements)}, Domain::any, DType::i32, int64_t(1) << 32, false};
}

}  // namespace loom::detail
