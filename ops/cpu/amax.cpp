// CPU kernels of amax (ops/src/amax.cpp): the reduction engine (kernels/reduce.h)
// with a running max, and the plain reference reduction.
#include <limits>

#include "loom/kernel_table.h"
#include "loom/kernels/reduce.h"
#include "loom/ops/kernel_signatures.h"
#include "type_lists.h"

namespace loom {

namespace {
template <typename T>
struct MaxReducer {
  using Acc = T;
  Acc init() const {
    if constexpr (std::numeric_limits<T>::has_infinity)
      return -std::numeric_limits<T>::infinity();
    else
      return std::numeric_limits<T>::lowest();
  }
  // NaN wins (v != v) and then stays: max propagates NaN like PyTorch.
  void add(Acc& acc, T v) const { acc = (v > acc || v != v) ? v : acc; }
  void merge(Acc& acc, const Acc& other) const { add(acc, other); }
  void add_span(Acc& acc, const T* p, int64_t n) const { kernels::add_span_lanes(*this, acc, p, n); }
  T finish(const Acc& acc, int64_t) const { return acc; }
};

template <typename T>
void amax_fast(const Tensor& out, const Tensor& x, const Shape& dims) {
  kernels::reduce_loop<T, T>(out, x, dims, MaxReducer<T>{});
}
template <typename T>
void amax_reference(const Tensor& out, const Tensor& x, const Shape& dims) {
  kernels::reference_reduce<T, T>(out, x, dims, MaxReducer<T>{});
}
template <typename T>
void register_for() {
  register_kernel<kernels::ReduceKernel>("amax", DeviceType::cpu, dtype_of<T>(), amax_fast<T>, amax_reference<T>);
}
}  // namespace

LOOM_KERNELS(cpu_amax) {
  kernels::for_each_type(NumericTypes{}, [](auto tag) { register_for<typename decltype(tag)::type>(); });
}

}  // namespace loom
