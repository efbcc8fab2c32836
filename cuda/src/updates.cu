// The optimizers' in-place updates on the GPU (adam_step_, adam_steps_, sgd_step_): the CPU's arithmetic.
#include <cstdint>

#include "kernel_errors.h"
#include "loom/cuda/launch.h"
#include "updates_launch.h"

namespace loom::cuda {

namespace {

template <typename T>
__global__ void adam_kernel(T* w, const T* g, T* m, T* v, int64_t n, AdamArgs a) {
  const T beta1 = static_cast<T>(a.beta1), beta2 = static_cast<T>(a.beta2), eps = static_cast<T>(a.eps);
  const T step = static_cast<T>(a.step_size), root_c2 = static_cast<T>(a.root_correction2);
  const T shrink = static_cast<T>(a.shrink), wd = static_cast<T>(a.l2);
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const T gi = g[i] + wd * w[i];
    m[i] = beta1 * m[i] + (T(1) - beta1) * gi;
    v[i] = beta2 * v[i] + (T(1) - beta2) * gi * gi;
    w[i] = shrink * w[i] - step * m[i] / (sqrt(v[i]) / root_c2 + eps);
  }
}

// One block per kThreads elements of one parameter; the block finds its parameter in the table.
template <typename T>
__global__ void adam_steps_kernel(AdamTensors t) {
  int k = 0;
  while (k + 1 < t.count && blockIdx.x >= t.first_block[k + 1]) ++k;
  const AdamTensor& p = t.tensor[k];
  const int64_t i = (blockIdx.x - t.first_block[k]) * int64_t(blockDim.x) + threadIdx.x;
  if (i >= p.n) return;
  const T beta1 = static_cast<T>(t.beta1), beta2 = static_cast<T>(t.beta2), eps = static_cast<T>(t.eps);
  const T step = static_cast<T>(p.step_size), root_c2 = static_cast<T>(p.root_correction2);
  const T shrink = static_cast<T>(p.shrink), wd = static_cast<T>(p.l2);
  T *w = static_cast<T*>(p.w), *m = static_cast<T*>(p.m), *v = static_cast<T*>(p.v);
  const T gi = static_cast<const T*>(p.grad)[i] + wd * w[i];
  m[i] = beta1 * m[i] + (T(1) - beta1) * gi;
  v[i] = beta2 * v[i] + (T(1) - beta2) * gi * gi;
  w[i] = shrink * w[i] - step * m[i] / (sqrt(v[i]) / root_c2 + eps);
}

template <typename T>
__global__ void sgd_kernel(T* w, const T* g, T* buf, int64_t n, SgdArgs a) {
  const T lr = static_cast<T>(a.lr), wd = static_cast<T>(a.weight_decay), mu = static_cast<T>(a.momentum);
  const T keep = static_cast<T>(1.0 - a.dampening);
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    T d = g[i] + wd * w[i];
    if (buf) {
      buf[i] = a.first ? d : mu * buf[i] + keep * d;
      d = a.nesterov ? d + mu * buf[i] : buf[i];
    }
    w[i] -= lr * d;
  }
}

}  // namespace

template <typename T>
void launch_adam_step(void* w, const void* grad, void* m, void* v, int64_t n, const AdamArgs& a, cudaStream_t stream) {
  if (n == 0) return;
  adam_kernel<T><<<blocks_for(n), kThreads, 0, stream>>>(static_cast<T*>(w), static_cast<const T*>(grad),
                                                         static_cast<T*>(m), static_cast<T*>(v), n, a);
  check_kernel_launch("adam_kernel");
}

template <typename T>
void launch_adam_steps(const AdamTensors& tensors, cudaStream_t stream) {
  const int64_t blocks = tensors.first_block[tensors.count];
  if (blocks == 0) return;
  adam_steps_kernel<T><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(tensors);
  check_kernel_launch("adam_steps_kernel");
}

template <typename T>
void launch_sgd_step(void* w, const void* grad, void* buffer, int64_t n, const SgdArgs& a, cudaStream_t stream) {
  if (n == 0) return;
  sgd_kernel<T><<<blocks_for(n), kThreads, 0, stream>>>(static_cast<T*>(w), static_cast<const T*>(grad),
                                                        static_cast<T*>(buffer), n, a);
  check_kernel_launch("sgd_kernel");
}

template void launch_adam_step<float>(void*, const void*, void*, void*, int64_t, const AdamArgs&, cudaStream_t);
template void launch_adam_step<double>(void*, const void*, void*, void*, int64_t, const AdamArgs&, cudaStream_t);
template void launch_adam_steps<float>(const AdamTensors&, cudaStream_t);
template void launch_adam_steps<double>(const AdamTensors&, cudaStream_t);
template void launch_sgd_step<float>(void*, const void*, void*, int64_t, const SgdArgs&, cudaStream_t);
template void launch_sgd_step<double>(void*, const void*, void*, int64_t, const SgdArgs&, cudaStream_t);

}  // namespace loom::cuda
