// CPU kernels of var (ops/src/var.cpp), which hands them the centred values
// x - mean (its first pass, through ops): the reduction engine (kernels/reduce.h)
// summing squares in double, and the plain reference loop.
#include "loom/kernel_table.h"
#include "loom/kernels/reduce.h"
#include "loom/ops/kernel_signatures.h"
#include "type_lists.h"

namespace loom {

namespace {
// Sum of squares in double, cast to T, then divided in T (as a div by the divisor would).
template <typename T>
struct SquareSumReducer {
  using Acc = double;
  T divisor;
  Acc init() const { return 0; }
  void add(Acc& acc, T v) const { acc += static_cast<double>(v) * v; }
  void merge(Acc& acc, const Acc& other) const { acc += other; }
  void add_span(Acc& acc, const T* p, int64_t n) const { kernels::add_span_lanes(*this, acc, p, n); }
  T finish(const Acc& acc, int64_t) const { return static_cast<T>(acc) / divisor; }
};

template <typename T>
void var_fast(const Tensor& out, const Tensor& centred, const Shape& dims, double divisor) {
  kernels::reduce_loop<T, T>(out, centred, dims, SquareSumReducer<T>{static_cast<T>(divisor)});
}

// For each output: the sum of its squared deviations, in index order, over the divisor.
template <typename T>
void var_reference(const Tensor& out, const Tensor& centred, const Shape& dims, double divisor) {
  kernels::reference_reduce_each<T>(out, centred, dims, [divisor](auto at, int64_t count) {
    double squares = 0;
    for (int64_t j = 0; j < count; ++j) squares += at(j) * at(j);
    return squares / divisor;
  });
}

template <typename T>
void register_for() {
  register_kernel<kernels::VarKernel>("var", DeviceType::cpu, dtype_of<T>(), var_fast<T>, var_reference<T>);
}
}  // namespace

LOOM_KERNELS(cpu_var) {
  kernels::for_each_type(FloatingTypes{}, [](auto tag) { register_for<typename decltype(tag)::type>(); });
}

}  // namespace loom
