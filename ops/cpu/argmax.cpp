// CPU kernels of argmax and argmin (ops/src/argmax.cpp, argmin.cpp): the reduction
// engine (kernels/reduce.h) tracking the best value and its position, and the plain
// reference reduction.
#include <algorithm>
#include <bit>
#include <limits>
#include <type_traits>

#include "loom/kernel_table.h"
#include "loom/kernels/reduce.h"
#include "loom/ops/kernel_signatures.h"
#include "type_lists.h"

namespace loom {

namespace {
// Tracks the best value (the largest, or the smallest), its position, and how many
// elements it has seen; the reduce engine feeds elements (and merges blocks) in
// index order, so positions are exact and the first best wins. A NaN is best either way.
template <typename T, kernels::Extreme E>
struct ArgExtremeReducer {
  struct Acc {
    T best;
    int64_t best_index = 0;
    int64_t seen = 0;
  };
  static bool better(T v, T best) { return kernels::beats<E>(v, best) || (v != v && best == best); }
  Acc init() const { return {kernels::worst_value<T, E>()}; }
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

  // A unit-stride span (greedy decoding's rows of logits) in two vector passes
  // instead of one compare-and-branch per element: its best (and whether it
  // holds a NaN), then the first position equal to it (or the first NaN). The
  // same answer as add() element by element: the first best, a NaN first.
  void add_span(Acc& acc, const T* p, int64_t n) const {
    if constexpr (!std::is_arithmetic_v<T>) {
      for (int64_t i = 0; i < n; ++i) add(acc, p[i]);
    } else {
      if (n == 0) return;
      T top = p[0];
      int has_nan = 0;  // an int: a bool's reduction did not vectorize (10x slower)
      if constexpr (E == kernels::Extreme::largest) {
#pragma omp simd reduction(max : top) reduction(| : has_nan)
        for (int64_t i = 0; i < n; ++i) {
          top = p[i] > top ? p[i] : top;
          has_nan |= p[i] != p[i];
        }
      } else {
#pragma omp simd reduction(min : top) reduction(| : has_nan)
        for (int64_t i = 0; i < n; ++i) {
          top = p[i] < top ? p[i] : top;
          has_nan |= p[i] != p[i];
        }
      }
      const int64_t at =
          has_nan ? first_where(p, n, [](T v) { return v != v; }) : first_where(p, n, [top](T v) { return v == top; });
      merge(acc, Acc{p[at], at, n});
    }
  }
  // The first i with pred(p[i]) (the callers know one exists), 32 elements'
  // predicates at a time as a bitmask (32-bit lanes: twice the speed of 64).
  template <typename Pred>
  static int64_t first_where(const T* p, int64_t n, Pred pred) {
    for (int64_t first = 0; first < n; first += 32) {
      const int64_t count = std::min<int64_t>(32, n - first);
      uint32_t bits = 0;
#pragma omp simd reduction(| : bits)
      for (int64_t j = 0; j < count; ++j) bits |= static_cast<uint32_t>(pred(p[first + j])) << j;
      if (bits) return first + std::countr_zero(bits);
    }
    return 0;
  }
};
}  // namespace

namespace {
template <typename T, kernels::Extreme E>
void arg_extreme_fast(const Tensor& out, const Tensor& x, const Shape& dims) {
  kernels::reduce_loop<T, int64_t>(out, x, dims, ArgExtremeReducer<T, E>{});
}
template <typename T, kernels::Extreme E>
void arg_extreme_reference(const Tensor& out, const Tensor& x, const Shape& dims) {
  kernels::reference_reduce<T, int64_t>(out, x, dims, ArgExtremeReducer<T, E>{});
}
// Registered under x's dtype; out is int64.
template <typename T>
void register_for() {
  using enum kernels::Extreme;
  register_kernel<kernels::ReduceKernel>("argmax", DeviceType::cpu, dtype_of<T>(), arg_extreme_fast<T, largest>,
                                         arg_extreme_reference<T, largest>);
  register_kernel<kernels::ReduceKernel>("argmin", DeviceType::cpu, dtype_of<T>(), arg_extreme_fast<T, smallest>,
                                         arg_extreme_reference<T, smallest>);
}
}  // namespace

LOOM_KERNELS(cpu_argmax) {
  kernels::for_each_type(NumericTypes{}, [](auto tag) { register_for<typename decltype(tag)::type>(); });
}

}  // namespace loom
