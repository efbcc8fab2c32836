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
struct SgdArgs {
  double lr, weight_decay, momentum, dampening;
  bool nesterov, first;
};
template <typename T>
void launch_sgd_step(void* w, const void* grad, void* buffer, int64_t n, const SgdArgs& a, cudaStream_t stream);

}  // namespace loom::cuda
