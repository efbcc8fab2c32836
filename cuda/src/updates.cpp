// Registers the optimizers' in-place steps adam_step_ and sgd_step_ for cuda (kernels: updates.cu).
#include "loom/kernel_table.h"
#include "loom/ops/kernel_signatures.h"
#include "updates_launch.h"
#include "tensor_args.h"

namespace loom::cuda {

namespace {

template <typename T>
void adam_step(const Tensor& w, const Tensor& grad, const Tensor& m, const Tensor& v, const AdamStep& s) {
  OnDevice on(w);
  launch_adam_step<T>(w.raw_data(), grad.raw_data(), m.raw_data(), v.raw_data(), w.numel(),
                      {s.beta1, s.beta2, s.eps, s.step_size, s.root_correction2, s.shrink, s.l2}, on.stream());
}

template <typename T>
void sgd_step(const Tensor& w, const Tensor& grad, const Tensor& buffer, const SgdStep& s) {
  OnDevice on(w);
  launch_sgd_step<T>(w.raw_data(), grad.raw_data(), buffer.defined() ? buffer.raw_data() : nullptr, w.numel(),
                     {s.lr, s.weight_decay, s.momentum, s.dampening, s.nesterov, s.first}, on.stream());
}

}  // namespace

LOOM_KERNELS(cuda_updates) {
  register_kernel<kernels::AdamStepKernel>("adam_step_", DeviceType::cuda, DType::f32, adam_step<float>);
  register_kernel<kernels::AdamStepKernel>("adam_step_", DeviceType::cuda, DType::f64, adam_step<double>);
  register_kernel<kernels::SgdStepKernel>("sgd_step_", DeviceType::cuda, DType::f32, sgd_step<float>);
  register_kernel<kernels::SgdStepKernel>("sgd_step_", DeviceType::cuda, DType::f64, sgd_step<double>);
}

}  // namespace loom::cuda
