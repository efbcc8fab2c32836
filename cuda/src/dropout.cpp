// Registers dropout and dropout_backward for cuda (kernels: dropout.cu).
#include "loom/kernel_table.h"
#include "loom/ops/kernel_signatures.h"
#include "dropout_launch.h"
#include "tensor_args.h"

namespace loom::cuda {

namespace {

uint32_t* mask_words(const Tensor& mask) { return static_cast<uint32_t*>(mask.raw_data()); }

template <typename T>
void dropout(const Tensor& out, const Tensor& mask, const Tensor& x, double p, uint64_t seed, uint64_t offset) {
  OnDevice on(out);
  launch_dropout<T>(out.raw_data(), mask_words(mask), x.raw_data(), x.numel(), p, seed, offset, on.stream());
}

template <typename T>
void dropout_backward(const Tensor& out, const Tensor& grad, const Tensor& mask, double p) {
  OnDevice on(out);
  launch_dropout_backward<T>(out.raw_data(), grad.raw_data(), mask_words(mask), grad.numel(), p, on.stream());
}

}  // namespace

LOOM_KERNELS(cuda_dropout) {
  register_kernel<kernels::DropoutKernel>("dropout", DeviceType::cuda, DType::f32, dropout<float>);
  register_kernel<kernels::DropoutKernel>("dropout", DeviceType::cuda, DType::f64, dropout<double>);
  register_kernel<kernels::DropoutBackwardKernel>("dropout_backward", DeviceType::cuda, DType::f32,
                                                  dropout_backward<float>);
  register_kernel<kernels::DropoutBackwardKernel>("dropout_backward", DeviceType::cuda, DType::f64,
                                                  dropout_backward<double>);
}

}  // namespace loom::cuda
