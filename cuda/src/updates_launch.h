#pragma once
// The optimizer steps on the GPU (updates.cu), registered by updates.cpp.
#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

namespace loom::cuda {

// The CPU's update arithmetic (ops/cpu/updates.cpp), one element per thread; all dense.
struct AdamArgs {
  double beta1, beta2, eps, step_size, root_correction2, shrink, l2;
};
template <typename T>
void launch_adam_step(void* w, const void* grad, void* m, void* v, int64_t n, const AdamArgs& a, cudaStream_t stream);
// adam_steps_: up to kAdamTensorsPerLaunch parameters a launch, their addresses and scalars
// passed by value in the launch's arguments (under 4 KB, as PyTorch's multi_tensor_apply);
// parameter k's elements are blocks [first_block[k], first_block[k + 1]) of the grid.
struct AdamTensor {
  void* w;
  const void* grad;
  void* m;
  void* v;
  int64_t n;
  double step_size, root_correction2, shrink, l2;
};
inline constexpr int kAdamTensorsPerLaunch = 48;
struct AdamTensors {
  AdamTensor tensor[kAdamTensorsPerLaunch];
  int64_t first_block[kAdamTensorsPerLaunch + 1];
  int count;
  double beta1, beta2, eps;
};
template <typename T>
void launch_adam_steps(const AdamTensors& tensors, cudaStream_t stream);
struct SgdArgs {
  double lr, weight_decay, momentum, dampening;
  bool nesterov, first;
};
template <typename T>
void launch_sgd_step(void* w, const void* grad, void* buffer, int64_t n, const SgdArgs& a, cudaStream_t stream);

}  // namespace loom::cuda
