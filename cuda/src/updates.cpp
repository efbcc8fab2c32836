// Registers the optimizers' in-place steps adam_step_, adam_steps_ and sgd_step_ for cuda (kernels: updates.cu).
#include <algorithm>

#include "loom/cuda/launch.h"
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

// The parameters in launches of up to kAdamTensorsPerLaunch (a few launches for a model's hundreds).
template <typename T>
void adam_steps(const std::vector<Tensor>& w, const std::vector<Tensor>& grad, const std::vector<Tensor>& m,
                const std::vector<Tensor>& v, const std::vector<AdamStep>& steps) {
  OnDevice on(w[0]);
  for (size_t first = 0; first < w.size(); first += kAdamTensorsPerLaunch) {
    AdamTensors table{};
    table.beta1 = steps[0].beta1, table.beta2 = steps[0].beta2, table.eps = steps[0].eps;
    for (size_t k = first; k < std::min(w.size(), first + kAdamTensorsPerLaunch); ++k, ++table.count) {
      const AdamStep& s = steps[k];
      table.tensor[table.count] = {w[k].raw_data(),    grad[k].raw_data(), m[k].raw_data(),
                                   v[k].raw_data(),    w[k].numel(),       s.step_size,
                                   s.root_correction2, s.shrink,           s.l2};
      table.first_block[table.count + 1] = table.first_block[table.count] + (w[k].numel() + kThreads - 1) / kThreads;
    }
    launch_adam_steps<T>(table, on.stream());
  }
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
  register_kernel<kernels::AdamStepsKernel>("adam_steps_", DeviceType::cuda, DType::f32, adam_steps<float>);
  register_kernel<kernels::AdamStepsKernel>("adam_steps_", DeviceType::cuda, DType::f64, adam_steps<double>);
  register_kernel<kernels::SgdStepKernel>("sgd_step_", DeviceType::cuda, DType::f32, sgd_step<float>);
  register_kernel<kernels::SgdStepKernel>("sgd_step_", DeviceType::cuda, DType::f64, sgd_step<double>);
}

}  // namespace loom::cuda
