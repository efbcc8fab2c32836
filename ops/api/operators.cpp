// Operator sugar over add/sub/mul/div. The right operand carries the caller's
// source line, so anomaly mode can point at `y = x * w` in user code.
#include "elementwise.h"

namespace loom {

// Under the user's line as the call site: an undefined `like` (a .grad() read too
// early) is named at that line.
Tensor Operand::as_tensor(const Tensor& like) const {
  CallSite site(where);
  return tensor.defined() ? tensor : scalar_tensor(scalar, {like.dtype(), like.device()});
}

Tensor operator+(const Tensor& a, const Operand& b) { return add(a, b.as_tensor(a), b.where); }
Tensor operator-(const Tensor& a, const Operand& b) { return sub(a, b.as_tensor(a), b.where); }
Tensor operator*(const Tensor& a, const Operand& b) { return mul(a, b.as_tensor(a), b.where); }
Tensor operator/(const Tensor& a, const Operand& b) { return div(a, b.as_tensor(a), b.where); }

namespace {
Tensor scalar_like(double value, const Operand& other) {
  CallSite site(other.where);
  LOOM_CHECK(other.tensor.defined(), "operator: both operands are scalars");
  return scalar_tensor(value, {other.tensor.dtype(), other.tensor.device()});
}
}  // namespace

Tensor operator+(double a, const Operand& b) { return add(scalar_like(a, b), b.tensor, b.where); }
Tensor operator-(double a, const Operand& b) { return sub(scalar_like(a, b), b.tensor, b.where); }
Tensor operator*(double a, const Operand& b) { return mul(scalar_like(a, b), b.tensor, b.where); }
Tensor operator/(double a, const Operand& b) { return div(scalar_like(a, b), b.tensor, b.where); }
Tensor operator-(const Tensor& x) { return neg(x); }

}  // namespace loom
