// Registers the fused row kernels for cuda: softmax, log_softmax (and their
// backward), layer_norm (and its backward), label-smoothed cross-entropy.
#include "loom/kernel_table.h"
#include "loom/ops/kernel_signatures.h"
#include "rows_launch.h"
#include "tensor_args.h"

namespace loom::cuda {

namespace {

Rows rows_of(const Tensor& x) {
  const int64_t n = x.dim() == 0 ? 1 : x.shape().back();
  return {n == 0 ? 0 : x.numel() / n, n};
}

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

const void* data_or_null(const Tensor& t) { return t.defined() ? t.raw_data() : nullptr; }

template <typename T>
void layer_norm(const Tensor& out, const Tensor& stats, const Tensor& x, const Tensor& weight, const Tensor& bias,
                double eps) {
  OnDevice on(out);
  launch_layer_norm<T>(rows_of(x), out.raw_data(), stats.raw_data(), x.raw_data(), data_or_null(weight),
                       data_or_null(bias), eps, on.stream());
}

template <typename T>
void layer_norm_backward(const Tensor& dx, const Tensor& params, const Tensor& x, const Tensor& weight,
                         const Tensor& grad, const Tensor& stats, double eps) {
  OnDevice on(x);
  const Rows s = rows_of(x);
  Tensor row_stats = stats;
  if (!row_stats.defined()) {  // not saved by the forward: computed again, as the CPU does
    row_stats = Tensor::empty({s.rows, 2}, {x.dtype(), x.device()});
    launch_layer_norm<T>(s, nullptr, row_stats.raw_data(), x.raw_data(), nullptr, nullptr, eps, on.stream());
  }
  launch_layer_norm_backward<T>(s, dx.defined() ? dx.raw_data() : nullptr, params.defined() ? params.raw_data() : nullptr,
                                x.raw_data(), data_or_null(weight), grad.raw_data(), row_stats.raw_data(), eps,
                                on.stream());
}

// Every target id in [0, V) or ignore_index, else the CPU's error.
void check_targets(const Tensor& logits, const Tensor& target, const kernels::CrossEntropyArgs& a, cudaStream_t stream) {
  const int64_t V = logits.shape().back();
  Tensor scratch = Tensor::empty({1}, {DType::i64, logits.device()});
  BadId bad = find_bad_id(static_cast<const int64_t*>(target.raw_data()), target.numel(), V, a.ignore_index, true,
                          scratch.raw_data(), stream);
  LOOM_CHECK(bad.position < 0,
             "{}: target id {} (at flat position {}) is out of range for V = {} classes: ids must be in [0, {}) "
             "or equal ignore_index ({})",
             a.op, bad.id, bad.position, V, V, a.ignore_index);
}

template <typename T>
void cross_entropy(const Tensor& loss, const Tensor& logits, const Tensor& target, const kernels::CrossEntropyArgs& a) {
  OnDevice on(loss);
  check_targets(logits, target, a, on.stream());
  const Rows s = rows_of(logits);
  Tensor row_loss = Tensor::empty({s.rows}, {DType::f64, logits.device()});
  launch_cross_entropy<T>(s, loss.raw_data(), logits.raw_data(), static_cast<const int64_t*>(target.raw_data()),
                          a.smoothing, a.ignore_index, static_cast<double*>(row_loss.raw_data()), on.stream());
}

template <typename T>
void cross_entropy_backward(const Tensor& out, const Tensor& logits, const Tensor& target, const Tensor& grad,
                            const kernels::CrossEntropyArgs& a) {
  OnDevice on(out);
  check_targets(logits, target, a, on.stream());
  Tensor live = Tensor::empty({1}, {DType::f64, logits.device()});
  launch_cross_entropy_backward<T>(rows_of(logits), out.raw_data(), logits.raw_data(),
                                   static_cast<const int64_t*>(target.raw_data()), grad.raw_data(), a.smoothing,
                                   a.ignore_index, static_cast<double*>(live.raw_data()), on.stream());
}

template <typename T>
void register_rows() {
  constexpr DType t = dtype_of<T>();
  register_kernel<kernels::MaskedRowsKernel>("softmax", DeviceType::cuda, t, softmax<false, T>);
  register_kernel<kernels::MaskedRowsKernel>("log_softmax", DeviceType::cuda, t, softmax<true, T>);
  register_kernel<kernels::RowBackwardKernel>("softmax_backward", DeviceType::cuda, t, softmax_backward<false, T>);
  register_kernel<kernels::RowBackwardKernel>("log_softmax_backward", DeviceType::cuda, t, softmax_backward<true, T>);
  register_kernel<kernels::LayerNormKernel>("layer_norm", DeviceType::cuda, t, layer_norm<T>);
  // One kernel serves both backward ops (dx, [dw; db] or both at once), as on the CPU.
  for (const char* op : {"layer_norm_backward", "layer_norm_param_grads"})
    register_kernel<kernels::LayerNormBackwardKernel>(op, DeviceType::cuda, t, layer_norm_backward<T>);
  register_kernel<kernels::CrossEntropyKernel>("label_smoothed_cross_entropy", DeviceType::cuda, t, cross_entropy<T>);
  register_kernel<kernels::CrossEntropyBackwardKernel>("label_smoothed_cross_entropy_backward", DeviceType::cuda, t,
                                                       cross_entropy_backward<T>);
}

}  // namespace

LOOM_KERNELS(cuda_rows) {
  register_rows<float>();
  register_rows<double>();
}

}  // namespace loom::cuda
