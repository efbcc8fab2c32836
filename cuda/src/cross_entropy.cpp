// Registers the label-smoothed cross-entropy and its backward for cuda (kernels: cross_entropy.cu).
#include "loom/kernel_table.h"
#include "loom/ops/kernel_signatures.h"
#include "rows_launch.h"
#include "tensor_args.h"

namespace loom::cuda {

namespace {

// Every target id in [0, V) or ignore_index, else the CPU's error.
void check_targets(const Tensor& logits, const Tensor& target, const kernels::CrossEntropyArgs& a,
                   cudaStream_t stream) {
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
void register_for() {
  constexpr DType t = dtype_of<T>();
  register_kernel<kernels::CrossEntropyKernel>("label_smoothed_cross_entropy", DeviceType::cuda, t, cross_entropy<T>);
  register_kernel<kernels::CrossEntropyBackwardKernel>("label_smoothed_cross_entropy_backward", DeviceType::cuda, t,
                                                       cross_entropy_backward<T>);
}

}  // namespace

LOOM_KERNELS(cuda_cross_entropy) {
  register_for<float>();
  register_for<double>();
  register_for<bfloat16>();
}

}  // namespace loom::cuda
