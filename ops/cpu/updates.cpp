// CPU kernels of the parameter updates (ops/src/adam_step.cpp, adam_steps.cpp, sgd_step.cpp):
// the fast kernel is one fused OpenMP + SIMD pass over each parameter; the
// reference kernel is the same loop on one thread. Elementwise, so the bits
// never depend on the thread count.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "loom/kernel_table.h"
#include "loom/kernels/loops.h"
#include "loom/ops/kernel_signatures.h"
#include "type_lists.h"

namespace loom {

namespace {
// Calls body(begin, end) on one range per thread (kernels::parallel_ranges), or on
// all of [0, n) for the reference. The body's own loop is what the compiler
// vectorizes: its operands are local restrict pointers and scalars, so no store
// can alias them (through a lambda's captured references it could, and the loop
// stayed scalar: 4x slower, measured).
template <bool Fast, typename Body>
void for_each_range(int64_t n, Body body) {
  if constexpr (Fast)
    kernels::parallel_ranges(n, body);
  else
    body(int64_t{0}, n);
}

// Adam on elements [begin, end) of one parameter.
template <typename T>
void adam_range(const Tensor& wt, const Tensor& gt, const Tensor& mt, const Tensor& vt, const AdamStep& s,
                int64_t begin, int64_t end) {
  T* __restrict w = wt.data<T>();
  const T* __restrict g = gt.data<T>();
  T* __restrict m = mt.data<T>();
  T* __restrict v = vt.data<T>();
  const T beta1 = static_cast<T>(s.beta1), beta2 = static_cast<T>(s.beta2), eps = static_cast<T>(s.eps);
  const T step = static_cast<T>(s.step_size), root_c2 = static_cast<T>(s.root_correction2);
  const T shrink = static_cast<T>(s.shrink), wd = static_cast<T>(s.l2);
#pragma omp simd
  for (int64_t i = begin; i < end; ++i) {
    const T gi = g[i] + wd * w[i];
    const T mi = beta1 * m[i] + (T(1) - beta1) * gi;
    const T vi = beta2 * v[i] + (T(1) - beta2) * gi * gi;
    m[i] = mi;
    v[i] = vi;
    w[i] = shrink * w[i] - step * mi / (std::sqrt(vi) / root_c2 + eps);
  }
}

template <typename T, bool Fast>
void adam_step(const Tensor& w, const Tensor& g, const Tensor& m, const Tensor& v, const AdamStep& s) {
  for_each_range<Fast>(w.numel(), [&](int64_t begin, int64_t end) { adam_range<T>(w, g, m, v, s, begin, end); });
}

// Every parameter's elements as one range [0, total) split among the threads (small
// tensors such as biases would each be too short to split on their own).
template <typename T, bool Fast>
void adam_steps(const std::vector<Tensor>& w, const std::vector<Tensor>& g, const std::vector<Tensor>& m,
                const std::vector<Tensor>& v, const std::vector<AdamStep>& steps) {
  std::vector<int64_t> starts{0};  // parameter k holds [starts[k], starts[k + 1])
  for (const Tensor& t : w) starts.push_back(starts.back() + t.numel());
  for_each_range<Fast>(starts.back(), [&](int64_t begin, int64_t end) {
    size_t k = static_cast<size_t>(std::upper_bound(starts.begin(), starts.end(), begin) - starts.begin()) - 1;
    for (; k < w.size() && starts[k] < end; ++k)
      adam_range<T>(w[k], g[k], m[k], v[k], steps[k], std::max(begin, starts[k]) - starts[k],
                    std::min(end, starts[k + 1]) - starts[k]);
  });
}

template <typename T, bool Fast>
void sgd_step(const Tensor& wt, const Tensor& gt, const Tensor& buffer, const SgdStep& s) {
  T* __restrict w = wt.data<T>();
  const T* __restrict g = gt.data<T>();
  T* __restrict buf = buffer.defined() ? buffer.data<T>() : nullptr;
  const T lr = static_cast<T>(s.lr), wd = static_cast<T>(s.weight_decay), mu = static_cast<T>(s.momentum);
  const T keep = static_cast<T>(1.0 - s.dampening);
  const bool first = s.first, nesterov = s.nesterov;
  for_each_range<Fast>(wt.numel(), [=](int64_t begin, int64_t end) {
    if (!buf) {
#pragma omp simd
      for (int64_t i = begin; i < end; ++i) w[i] -= lr * (g[i] + wd * w[i]);
      return;
    }
#pragma omp simd
    for (int64_t i = begin; i < end; ++i) {
      const T d = g[i] + wd * w[i];
      const T b = first ? d : mu * buf[i] + keep * d;
      buf[i] = b;
      w[i] -= lr * (nesterov ? d + mu * b : b);
    }
  });
}

template <typename T>
void register_for() {
  register_kernel<kernels::AdamStepKernel>("adam_step_", DeviceType::cpu, dtype_of<T>(), adam_step<T, true>,
                                           adam_step<T, false>);
  register_kernel<kernels::AdamStepsKernel>("adam_steps_", DeviceType::cpu, dtype_of<T>(), adam_steps<T, true>,
                                            adam_steps<T, false>);
  register_kernel<kernels::SgdStepKernel>("sgd_step_", DeviceType::cpu, dtype_of<T>(), sgd_step<T, true>,
                                          sgd_step<T, false>);
}
}  // namespace

LOOM_KERNELS(cpu_updates) {
  kernels::for_each_type(FloatingTypes{}, [](auto tag) { register_for<typename decltype(tag)::type>(); });
}

}  // namespace loom
