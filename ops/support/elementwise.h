#pragma once
// What an op file needs: argument checks, output allocation and dispatch through
// the kernel table (the kernels live in ops/cpu, and in cuda/ for the GPU).
#include "loom/autograd.h"
#include "loom/kernel_table.h"
#include "loom/ops/kernel_signatures.h"
#include "loom/ops/shape_rules.h"
#include "loom/ops.h"
#include "loom/registry.h"

namespace loom::detail {

using Grads = std::vector<Tensor>;

const void* link_every_registration();  // generated: refers to every LOOM_OP and LOOM_KERNELS

// op's kernel for t's device and dtype. Referring to the generated list of
// registrations from every op keeps every kernel file in a static link.
template <typename Fn>
Kernel<Fn> kernel_for(std::string_view op, const Tensor& t) {
  [[maybe_unused]] static const void* linked = link_every_registration();
  return find_kernel<Fn>(op, t.device(), t.dtype());
}

// The dtypes an op accepts; check_dtype's message says which it expected.
enum class DTypes { floating, numeric, all };
void check_dtype(std::string_view op, const Tensor& t, DTypes allowed);

// Elementwise ops: checked, allocated, and run by the kernel registered under `op`.
Tensor unary_op(std::string_view op, const Tensor& x, DTypes allowed, kernels::Scalars scalars = {});
Tensor binary_op(std::string_view op, const Tensor& a, const Tensor& b, DTypes allowed);
// A comparison: operands of one dtype (bool included), a bool result.
Tensor compare_op(std::string_view op, const Tensor& a, const Tensor& b);

// Both operands on one device and of one dtype: loom never casts silently.
inline void check_same_kind(std::string_view op, const Tensor& a, const Tensor& b) {
  LOOM_CHECK(a.device() == b.device(), "{}: operands are on different devices ({} of shape {} and {} of shape {})", op,
             a.device(), a.shape(), b.device(), b.shape());
  LOOM_CHECK(a.dtype() == b.dtype(),
             "{}: operands have different dtypes ({} of shape {} and {} of shape {}); cast one with to_dtype", op,
             dtype_name(a.dtype()), a.shape(), dtype_name(b.dtype()), b.shape());
}

// PyTorch's result dtype for a binary op on a and b: the higher kind (bool < integer <
// floating) wins; within one kind the wider dtype, where a 0-d operand (a Python
// number) gives way to a dimensioned one, so x_f32 * 0-d f64 stays float32.
DType result_type(const Tensor& a, const Tensor& b);
// result_type, or float32 (PyTorch's default dtype) where that is an integer or bool:
// what true division and a tensor power compute in.
DType floating_result_type(const Tensor& a, const Tensor& b);
// op(a, b) with both cast to `dtype` by to_dtype, so each gradient comes back in its
// operand's dtype. The arithmetic ops start with it when their operands' dtypes differ.
using BinaryFn = Tensor (*)(const Tensor&, const Tensor&, Where);
Tensor call_promoted(BinaryFn op, const Tensor& a, const Tensor& b, DType dtype, Where where);

// A 0-d tensor holding `value` with t's dtype and device (for scalars in backward formulas).
inline Tensor constant_like(const Tensor& t, double value) { return scalar_tensor(value, {t.dtype(), t.device()}); }

// other * alpha for torch's add(input, other, alpha=...) and sub: an integer `other`
// takes only an integral alpha, as in torch.
Tensor times_alpha(const Tensor& other, double alpha, std::string_view op);

}  // namespace loom::detail
