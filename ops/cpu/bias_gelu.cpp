// CPU kernels of bias_gelu (ops/src/bias_gelu.cpp): out = gelu(x + b) row by row,
// x [rows, D] and b [D] dense. The fast kernel adds a block of rows' bias into out
// and runs gelu over it in place while it is in cache: one pass over memory. The
// reference takes one element at a time, with libm's erf.
#include <omp.h>

#include <algorithm>

#include "gelu_span.h"
#include "loom/kernel_table.h"
#include "loom/kernels/functors.h"
#include "loom/ops/kernel_signatures.h"
#include "type_lists.h"

namespace loom {

namespace {

template <typename T>
void bias_gelu_fast(const Tensor& out, const Tensor& x, const Tensor& bias) {
  const int64_t d = bias.numel(), rows = d == 0 ? 0 : x.numel() / d;
  const T *px = x.data<T>(), *pb = bias.data<T>();
  T* py = out.data<T>();
  const int64_t block = std::max<int64_t>(1, 16384 / std::max<int64_t>(d, 1));  // rows per block: ~64 KiB of float
#pragma omp parallel for schedule(static)
  for (int64_t r0 = 0; r0 < rows; r0 += block) {
    const int64_t r1 = std::min(rows, r0 + block);
    for (int64_t r = r0; r < r1; ++r)
      for (int64_t j = 0; j < d; ++j) py[r * d + j] = px[r * d + j] + pb[j];
    if constexpr (std::is_same_v<T, float>) {
      kernels::gelu_span(py + r0 * d, py + r0 * d, (r1 - r0) * d);
    } else {
      for (int64_t i = r0 * d; i < r1 * d; ++i) py[i] = fn::Gelu{}(py[i]);
    }
  }
}

template <typename T>
void bias_gelu_reference(const Tensor& out, const Tensor& x, const Tensor& bias) {
  const int64_t d = bias.numel();
  const T *px = x.data<T>(), *pb = bias.data<T>();
  T* py = out.data<T>();
  for (int64_t i = 0; i < x.numel(); ++i) py[i] = fn::GeluReference{}(px[i] + pb[i % d]);
}

template <typename T>
void register_for() {
  register_kernel<kernels::BiasActivationKernel>("bias_gelu", DeviceType::cpu, dtype_of<T>(), bias_gelu_fast<T>,
                                                 bias_gelu_reference<T>);
}

}  // namespace

LOOM_KERNELS(cpu_bias_gelu) {
  kernels::for_each_type(FloatingTypes{}, [](auto tag) { register_for<typename decltype(tag)::type>(); });
}

}  // namespace loom
