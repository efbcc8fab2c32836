// Registers dropout, relu_dropout and their backwards for cuda (kernels: dropout.cu).
#include "loom/kernel_table.h"
#include "loom/ops/kernel_signatures.h"
#include "dropout_launch.h"
#include "tensor_args.h"

namespace loom::cuda {

namespace {

uint32_t* mask_words(const Tensor& mask) { return static_cast<uint32_t*>(mask.raw_data()); }

template <typename T, bool Relu>
void dropout(const Tensor& out, const Tensor& mask, const Tensor& x, kernels::DropoutDraw draw) {
  OnDevice on(out);
  launch_dropout<T>(out.raw_data(), mask_words(mask), x.raw_data(), nullptr, x.numel(), draw.p, draw.seed, draw.offset,
                    captured_random_base(out.device().index), Relu, on.stream());
}

template <typename T>
void dropout_backward(const Tensor& out, const Tensor& grad, const Tensor& mask, double p) {
  OnDevice on(out);
  launch_dropout_backward<T>(out.raw_data(), grad.raw_data(), nullptr, mask_words(mask), grad.numel(), p, on.stream());
}

template <typename T>
void relu_dropout_backward(const Tensor& out, const Tensor& x, const Tensor& grad, const Tensor& mask, double p) {
  OnDevice on(out);
  launch_dropout_backward<T>(out.raw_data(), grad.raw_data(), x.raw_data(), mask_words(mask), grad.numel(), p,
                             on.stream());
}

template <typename T>
void register_for(DType type) {
  register_kernel<kernels::DropoutKernel>("dropout", DeviceType::cuda, type, dropout<T, false>);
  register_kernel<kernels::DropoutBackwardKernel>("dropout_backward", DeviceType::cuda, type, dropout_backward<T>);
  register_kernel<kernels::DropoutKernel>("relu_dropout", DeviceType::cuda, type, dropout<T, true>);
  register_kernel<kernels::ReluDropoutBackwardKernel>("relu_dropout_backward", DeviceType::cuda, type,
                                                      relu_dropout_backward<T>);
}

}  // namespace

LOOM_KERNELS(cuda_dropout) {
  register_for<float>(DType::f32);
  register_for<double>(DType::f64);
  register_for<bfloat16>(DType::bf16);
}

}  // namespace loom::cuda
