// Anomaly mode's scan (core/src/backward_engine.cpp): is any element NaN or Inf?
#include <cmath>

#include "loom/autograd.h"
#include "loom/kernel_table.h"
#include "loom/kernels/loops.h"

namespace loom {

namespace {
template <typename T>
bool any_non_finite(const Tensor& x) {
  bool bad = false;
  kernels::Loop<1> loop = kernels::make_loop<1>(x.shape(), {x.strides()});
  loop.offsets = {x.offset()};
  const T* p = static_cast<const T*>(x.storage()->data());
  auto scan = [&](int64_t n, const std::array<int64_t, 1>& off, const std::array<int64_t, 1>& st) {
    for (int64_t i = 0; i < n && !bad; ++i) bad = !std::isfinite(p[off[0] + i * st[0]]);
  };
  kernels::run_range(loop, 0, loop.numel, scan);
  return bad;
}
}  // namespace

LOOM_KERNELS(cpu_any_non_finite) {
  register_kernel<NonFiniteKernel>("any_non_finite", DeviceType::cpu, DType::f32, any_non_finite<float>);
  register_kernel<NonFiniteKernel>("any_non_finite", DeviceType::cpu, DType::f64, any_non_finite<double>);
}

}  // namespace loom
