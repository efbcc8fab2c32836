// CPU kernels of argmax (ops/src/argmax.cpp): the reduction engine (kernels/reduce.h)
// tracking the best value and its position, and the plain reference reduction.
#include <limits>

#include "loom/kernel_table.h"
#include "loom/kernels/reduce.h"
#include "loom/ops/kernel_signatures.h"
#include "type_lists.h"

namespace loom {

namespace {
// Tracks the best value, its position, and how many elements it has seen; the
// reduce engine feeds elements (and merges blocks) in index order, so positions
// are exact and the first maximum wins.
template <typename T>
struct ArgmaxReducer {
  struct Acc {
    T best;
    int64_t best_index = 0;
    int64_t seen = 0;
  };
  static bool better(T v, T best) { return v > best || (v != v && best == best); }
  Acc init() const {
    if constexpr (std::numeric_limits<T>::has_infinity)
      return {-std::numeric_limits<T>::infinity()};
    else
      return {std::numeric_limits<T>::lowest()};
  }
  void add(Acc& acc, T v) const {
    if (acc.seen == 0 || better(v, acc.best)) {
      acc.best = v;
      acc.best_index = acc.seen;
    }
    ++acc.seen;
  }
  void merge(Acc& acc, const Acc& other) const {
    if (other.seen > 0 && (acc.seen == 0 || better(other.best, acc.best))) {
      acc.best = other.best;
      acc.best_index = acc.seen + other.best_index;
    }
    acc.seen += other.seen;
  }
  int64_t finish(const Acc& acc, int64_t) const { return acc.best_index; }
};
}  // namespace

namespace {
template <typename T>
void argmax_fast(const Tensor& out, const Tensor& x, const Shape& dims) {
  kernels::reduce_loop<T, int64_t>(out, x, dims, ArgmaxReducer<T>{});
}
template <typename T>
void argmax_reference(const Tensor& out, const Tensor& x, const Shape& dims) {
  kernels::reference_reduce<T, int64_t>(out, x, dims, ArgmaxReducer<T>{});
}
// Registered under x's dtype; out is int64.
template <typename T>
void register_for() {
  register_kernel<kernels::ReduceKernel>("argmax", DeviceType::cpu, dtype_of<T>(), argmax_fast<T>, argmax_reference<T>);
}
}  // namespace

LOOM_KERNELS(cpu_argmax) {
  kernels::for_each_type(NumericTypes{}, [](auto tag) { register_for<typename decltype(tag)::type>(); });
}

}  // namespace loom
