// CPU kernels of amax and amin (ops/src/amax.cpp, amin.cpp): the reduction engine
// (kernels/reduce.h) with a running max or min, and the plain reference reduction.
#include <limits>

#include "loom/kernel_table.h"
#include "loom/kernels/reduce.h"
#include "loom/ops/kernel_signatures.h"
#include "type_lists.h"

namespace loom {

namespace {
template <typename T, kernels::Extreme E>
struct ExtremeReducer {
  using Acc = T;
  Acc init() const { return kernels::worst_value<T, E>(); }
  // NaN wins (v != v) and then stays: max and min propagate NaN like PyTorch.
  void add(Acc& acc, T v) const { acc = (kernels::beats<E>(v, acc) || v != v) ? v : acc; }
  void merge(Acc& acc, const Acc& other) const { add(acc, other); }
  void add_span(Acc& acc, const T* p, int64_t n) const { kernels::add_span_lanes(*this, acc, p, n); }
  T finish(const Acc& acc, int64_t) const { return acc; }
};

template <typename T, kernels::Extreme E>
void extreme_fast(const Tensor& out, const Tensor& x, const Shape& dims) {
  kernels::reduce_loop<T, T>(out, x, dims, ExtremeReducer<T, E>{});
}
template <typename T, kernels::Extreme E>
void extreme_reference(const Tensor& out, const Tensor& x, const Shape& dims) {
  kernels::reference_reduce<T, T>(out, x, dims, ExtremeReducer<T, E>{});
}
template <typename T>
void register_for() {
  using enum kernels::Extreme;
  register_kernel<kernels::ReduceKernel>("amax", DeviceType::cpu, dtype_of<T>(), extreme_fast<T, largest>,
                                         extreme_reference<T, largest>);
  register_kernel<kernels::ReduceKernel>("amin", DeviceType::cpu, dtype_of<T>(), extreme_fast<T, smallest>,
                                         extreme_reference<T, smallest>);
}
}  // namespace

LOOM_KERNELS(cpu_amax) {
  kernels::for_each_type(NumericTypes{}, [](auto tag) { register_for<typename decltype(tag)::type>(); });
}

}  // namespace loom
