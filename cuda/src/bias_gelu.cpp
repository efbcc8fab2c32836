// Registers bias_gelu for cuda (kernel: bias_gelu.cu).
#include "bias_gelu_launch.h"
#include "loom/kernel_table.h"
#include "loom/ops/kernel_signatures.h"
#include "tensor_args.h"

namespace loom::cuda {

namespace {

template <typename T>
void bias_gelu(const Tensor& out, const Tensor& x, const Tensor& bias) {
  OnDevice on(out);
  launch_bias_gelu<T>(out.raw_data(), x.raw_data(), bias.raw_data(), x.numel(), bias.numel(), on.stream());
}

}  // namespace

LOOM_KERNELS(cuda_bias_gelu) {
  register_kernel<kernels::BiasActivationKernel>("bias_gelu", DeviceType::cuda, DType::f32, bias_gelu<float>);
  register_kernel<kernels::BiasActivationKernel>("bias_gelu", DeviceType::cuda, DType::f64, bias_gelu<double>);
}

}  // namespace loom::cuda
