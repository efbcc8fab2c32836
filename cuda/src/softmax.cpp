// Registers softmax and log_softmax (with masks) and their backward for cuda
// (kernels: softmax.cu; one block per row).
#include "loom/kernel_table.h"
#include "loom/ops/kernel_signatures.h"
#include "rows_launch.h"
#include "tensor_args.h"

namespace loom::cuda {

namespace {

// The mask (undefined, bool, or additive of x's dtype) read as broadcast to x's shape.
RowMaskArgs row_mask(const Tensor& mask, const Tensor& x) {
  RowMaskArgs m;
  if (!mask.defined()) return m;
  LOOM_CHECK(x.dim() - 1 <= kMaxDims, "softmax: the CUDA kernels take masks of at most {} dims", kMaxDims + 1);
  Shape strides = broadcast_strides(mask, x.shape());
  m.kind = mask.dtype() == DType::b8 ? RowMaskArgs::boolean : RowMaskArgs::additive;
  m.data = mask.raw_data();
  m.outer_ndim = static_cast<int>(x.dim()) - 1;
  for (int d = 0; d < m.outer_ndim; ++d) {
    m.outer_sizes[d] = x.size(d);
    m.outer_strides[d] = strides[d];
  }
  m.step = strides.back();
  return m;
}

template <bool Log, typename T>
void softmax(const Tensor& out, const Tensor& x, const Tensor& mask) {
  OnDevice on(out);
  launch_softmax<T>(Log, rows_of(x), out.raw_data(), x.raw_data(), row_mask(mask, x), on.stream());
}

template <bool Log, typename T>
void softmax_backward(const Tensor& out, const Tensor& y, const Tensor& grad) {
  OnDevice on(out);
  launch_softmax_backward<T>(Log, rows_of(y), out.raw_data(), y.raw_data(), grad.raw_data(), on.stream());
}

template <typename T>
void register_for() {
  constexpr DType t = dtype_of<T>();
  register_kernel<kernels::MaskedRowsKernel>("softmax", DeviceType::cuda, t, softmax<false, T>);
  register_kernel<kernels::MaskedRowsKernel>("log_softmax", DeviceType::cuda, t, softmax<true, T>);
  register_kernel<kernels::RowBackwardKernel>("softmax_backward", DeviceType::cuda, t, softmax_backward<false, T>);
  register_kernel<kernels::RowBackwardKernel>("log_softmax_backward", DeviceType::cuda, t, softmax_backward<true, T>);
}

}  // namespace

LOOM_KERNELS(cuda_softmax) {
  register_for<float>();
  register_for<double>();
  register_for<bfloat16>();
}

}  // namespace loom::cuda
