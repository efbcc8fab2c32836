// CPU kernels of the parameter updates (ops/src/adam_step.cpp, sgd_step.cpp):
// the fast kernel is one fused OpenMP + SIMD pass over each parameter; the
// reference kernel is the same arithmetic as a plain loop. Elementwise, so the
// bits never depend on the thread count.
#include <omp.h>

#include <cmath>

#include "loom/kernel_table.h"
#include "loom/kernels/loops.h"
#include "loom/ops/kernel_signatures.h"
#include "type_lists.h"

namespace loom {

namespace {
template <bool Fast, typename Body>
void for_each_element(int64_t n, Body body) {
  if constexpr (Fast) {
#pragma omp parallel for simd schedule(static) if (n >= kernels::kParallelGrain && !omp_in_parallel())
    for (int64_t i = 0; i < n; ++i) body(i);
  } else {
    for (int64_t i = 0; i < n; ++i) body(i);
  }
}

template <typename T, bool Fast>
void adam_step(const Tensor& wt, const Tensor& gt, const Tensor& mt, const Tensor& vt, const AdamStep& s) {
  T* w = wt.data<T>();
  const T* g = gt.data<T>();
  T* m = mt.data<T>();
  T* v = vt.data<T>();
  const T beta1 = static_cast<T>(s.beta1), beta2 = static_cast<T>(s.beta2), eps = static_cast<T>(s.eps);
  const T step = static_cast<T>(s.step_size), root_c2 = static_cast<T>(s.root_correction2);
  const T shrink = static_cast<T>(s.shrink), wd = static_cast<T>(s.l2);
  for_each_element<Fast>(wt.numel(), [&](int64_t i) {
    const T gi = g[i] + wd * w[i];
    m[i] = beta1 * m[i] + (T(1) - beta1) * gi;
    v[i] = beta2 * v[i] + (T(1) - beta2) * gi * gi;
    w[i] = shrink * w[i] - step * m[i] / (std::sqrt(v[i]) / root_c2 + eps);
  });
}

template <typename T, bool Fast>
void sgd_step(const Tensor& wt, const Tensor& gt, const Tensor& buffer, const SgdStep& s) {
  T* w = wt.data<T>();
  const T* g = gt.data<T>();
  T* buf = buffer.defined() ? buffer.data<T>() : nullptr;
  const T lr = static_cast<T>(s.lr), wd = static_cast<T>(s.weight_decay), mu = static_cast<T>(s.momentum);
  const T keep = static_cast<T>(1.0 - s.dampening);
  const bool first = s.first, nesterov = s.nesterov;
  for_each_element<Fast>(wt.numel(), [&](int64_t i) {
    T d = g[i] + wd * w[i];
    if (buf) {
      buf[i] = first ? d : mu * buf[i] + keep * d;
      d = nesterov ? d + mu * buf[i] : buf[i];
    }
    w[i] -= lr * d;
  });
}

template <typename T>
void register_for() {
  register_kernel<kernels::AdamStepKernel>("adam_step_", DeviceType::cpu, dtype_of<T>(), adam_step<T, true>,
                                           adam_step<T, false>);
  register_kernel<kernels::SgdStepKernel>("sgd_step_", DeviceType::cpu, dtype_of<T>(), sgd_step<T, true>,
                                          sgd_step<T, false>);
}
}  // namespace

LOOM_KERNELS(cpu_updates) {
  kernels::for_each_type(kernels::FloatingTypes{}, [](auto tag) { register_for<typename decltype(tag)::type>(); });
}

}  // namespace loom
