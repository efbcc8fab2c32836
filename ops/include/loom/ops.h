#pragma once
// Every differentiable op of loom. Each is defined, with its derivative and its
// gradient-check samples, in its own file under ops/src/ (named after the op).
// Ops take the caller's source location so anomaly mode can name the user's line.
#include <source_location>
#include <vector>

#include "loom/autograd.h"
#include "loom/random.h"
#include "loom/tensor.h"

namespace loom {

// ---- factories (no gradient) ----
Tensor zeros(const Shape& shape, TensorOptions options = {});
Tensor ones(const Shape& shape, TensorOptions options = {});
Tensor full(const Shape& shape, double value, TensorOptions options = {});
Tensor zeros_like(const Tensor& t);
Tensor ones_like(const Tensor& t);
Tensor full_like(const Tensor& t, double value);
Tensor arange(int64_t end, TensorOptions options = {.dtype = DType::i64});
Tensor scalar_tensor(double value, TensorOptions options = {});
// Copies src into dst (same shape or broadcastable to it) without recording a
// gradient; for optimizer updates and initialization. Bumps dst's version.
void copy_(const Tensor& dst, const Tensor& src);
void fill_(const Tensor& dst, double value);

// ---- elementwise, broadcasting ----
Tensor add(const Tensor& a, const Tensor& b, Where where = Where::current());
Tensor sub(const Tensor& a, const Tensor& b, Where where = Where::current());
Tensor mul(const Tensor& a, const Tensor& b, Where where = Where::current());
Tensor div(const Tensor& a, const Tensor& b, Where where = Where::current());
Tensor neg(const Tensor& x, Where where = Where::current());
Tensor exp(const Tensor& x, Where where = Where::current());
Tensor log(const Tensor& x, Where where = Where::current());
Tensor tanh(const Tensor& x, Where where = Where::current());
Tensor relu(const Tensor& x, Where where = Where::current());
Tensor pow(const Tensor& x, double exponent, Where where = Where::current());
Tensor pow(const Tensor& x, const Tensor& exponent, Where where = Where::current());  // both differentiable
// grad where x > 0, else 0 (relu's backward, one fused kernel; differentiable).
Tensor relu_backward(const Tensor& x, const Tensor& grad, Where where = Where::current());
// 1 where x > 0, else 0 (relu's derivative; no gradient of its own).
Tensor step(const Tensor& x, Where where = Where::current());
// 1 - y*y (tanh's derivative in terms of its output y).
Tensor tanh_backward(const Tensor& y, const Tensor& grad, Where where = Where::current());

// ---- reductions ----
// Sum over `dims` (all dims when empty); keepdim leaves them as size 1.
Tensor sum(const Tensor& x, const Shape& dims = {}, bool keepdim = false, Where where = Where::current());
Tensor mean(const Tensor& x, const Shape& dims = {}, bool keepdim = false, Where where = Where::current());
// One dim as an integer: sum(x, 1, true), mean(x, -1).
inline Tensor sum(const Tensor& x, DimIndex auto dim, bool keepdim = false, Where where = Where::current()) {
  return sum(x, Shape{int64_t(dim)}, keepdim, where);
}
inline Tensor mean(const Tensor& x, DimIndex auto dim, bool keepdim = false, Where where = Where::current()) {
  return mean(x, Shape{int64_t(dim)}, keepdim, where);
}
// Sums a broadcast gradient back to `shape` (the inverse of broadcasting).
Tensor sum_to(const Tensor& x, const Shape& shape, Where where = Where::current());

// ---- linear algebra ----
// Matrix product with NumPy semantics: 1-D, 2-D, and batched with broadcast batch dims.
Tensor matmul(const Tensor& a, const Tensor& b, Where where = Where::current());
// Whether float32 matmuls on the CPU can run in bf16 (loom/matmul_precision.h):
// the CPU has AVX512-BF16. Without it, bf16 precision computes in float32.
bool cpu_bf16_matmul_available();

// ---- views (share storage) and copies ----
Tensor reshape(const Tensor& x, const Shape& shape, Where where = Where::current());
Tensor view(const Tensor& x, const Shape& shape, Where where = Where::current());
Tensor permute(const Tensor& x, const Shape& dims, Where where = Where::current());
Tensor transpose(const Tensor& x, int64_t dim0, int64_t dim1, Where where = Where::current());
Tensor slice(const Tensor& x, int64_t dim, int64_t start, int64_t end, int64_t step = 1,
             Where where = Where::current());
Tensor narrow(const Tensor& x, int64_t dim, int64_t start, int64_t length, Where where = Where::current());
Tensor select(const Tensor& x, int64_t dim, int64_t index, Where where = Where::current());
Tensor expand(const Tensor& x, const Shape& shape, Where where = Where::current());
Tensor squeeze(const Tensor& x, int64_t dim, Where where = Where::current());
Tensor unsqueeze(const Tensor& x, int64_t dim, Where where = Where::current());
Tensor contiguous(const Tensor& x, Where where = Where::current());
Tensor clone(const Tensor& x, Where where = Where::current());
Tensor to_dtype(const Tensor& x, DType dtype, Where where = Where::current());
Tensor to_device(const Tensor& x, Device device, Where where = Where::current());
// The gradient of slice: zeros of `input_shape` with grad written into the slice.
Tensor slice_backward(const Tensor& grad, const Shape& input_shape, int64_t dim, int64_t start, int64_t end,
                      int64_t step, Where where = Where::current());

// ---- operators: the right operand carries the caller's source line ----
// (a default argument of a converting constructor is evaluated at the call site.)
struct Operand {
  Tensor tensor;
  double scalar = 0;
  Where where;
  Operand(const Tensor& t, Where w = Where::current()) : tensor(t), where(w) {}
  Operand(double s, Where w = Where::current()) : scalar(s), where(w) {}
  // The operand as a tensor matching `like` (a scalar becomes a 0-d tensor).
  Tensor as_tensor(const Tensor& like) const;
};

Tensor operator+(const Tensor& a, const Operand& b);
Tensor operator-(const Tensor& a, const Operand& b);
Tensor operator*(const Tensor& a, const Operand& b);
Tensor operator/(const Tensor& a, const Operand& b);
Tensor operator+(double a, const Operand& b);
Tensor operator-(double a, const Operand& b);
Tensor operator*(double a, const Operand& b);
Tensor operator/(double a, const Operand& b);
Tensor operator-(const Tensor& x);

}  // namespace loom
#include "loom/ops/fused.h"
#include "loom/ops/shape.h"
#include "loom/ops/elementwise.h"
#include "loom/ops/updates.h"
