// Registers layer_norm and its backward ops for cuda (kernels: layer_norm.cu).
#include "loom/kernel_table.h"
#include "loom/ops/kernel_signatures.h"
#include "rows_launch.h"
#include "tensor_args.h"

namespace loom::cuda {

namespace {

template <typename T>
void layer_norm(const Tensor& out, const Tensor& stats, const Tensor& x, const Tensor& weight, const Tensor& bias,
                double eps) {
  OnDevice on(out);
  launch_layer_norm<T>(rows_of(x), out.raw_data(), stats.raw_data(), x.raw_data(),
                       data_or_null(widened(weight, on.stream())), data_or_null(widened(bias, on.stream())), eps,
                       on.stream());
}

template <typename T>
void layer_norm_backward(const Tensor& dx, const Tensor& params, const Tensor& x, const Tensor& weight,
                         const Tensor& grad, const Tensor& stats, double eps) {
  OnDevice on(x);
  const Rows s = rows_of(x);
  Tensor row_stats = stats;
  if (!row_stats.defined()) {  // not saved by the forward: computed again, as the CPU does
    row_stats = Tensor::empty({s.rows, 2}, {dtype_of<compute_type<T>>(), x.device()});
    launch_layer_norm<T>(s, nullptr, row_stats.raw_data(), x.raw_data(), nullptr, nullptr, eps, on.stream());
  }
  launch_layer_norm_backward<T>(
      s, dx.defined() ? dx.raw_data() : nullptr, params.defined() ? params.raw_data() : nullptr, x.raw_data(),
      data_or_null(widened(weight, on.stream())), grad.raw_data(), row_stats.raw_data(), eps, on.stream());
}

template <typename T>
void register_for() {
  constexpr DType t = dtype_of<T>();
  register_kernel<kernels::LayerNormKernel>("layer_norm", DeviceType::cuda, t, layer_norm<T>);
  // One kernel serves both backward ops (dx, [dw; db] or both at once), as on the CPU.
  for (const char* op : {"layer_norm_backward", "layer_norm_param_grads"})
    register_kernel<kernels::LayerNormBackwardKernel>(op, DeviceType::cuda, t, layer_norm_backward<T>);
}

}  // namespace

LOOM_KERNELS(cuda_layer_norm) {
  register_for<float>();
  register_for<double>();
  register_for<bfloat16>();
}

}  // namespace loom::cuda
