// CPU kernels of logsumexp (ops/src/logsumexp.cpp): the reduction engine
// (kernels/reduce.h) with a running max and rescaled sum, one pass; the
// reference kernel is the plain two-pass formula.
#include <cmath>

#include "loom/kernel_table.h"
#include "loom/kernels/reduce.h"
#include "loom/ops/kernel_signatures.h"
#include "type_lists.h"

namespace loom {

namespace {
// Running (max, sum of exp(v - max)) in double.
template <typename T>
struct LogSumExpReducer {
  struct Acc {
    double max = -INFINITY;
    double sum = 0;
  };
  Acc init() const { return {}; }
  void add(Acc& acc, T value) const {
    double v = value;
    if (v > acc.max) {
      acc.sum = acc.sum * std::exp(acc.max - v) + 1;  // rescale to the new max
      acc.max = v;
    } else {
      acc.sum += v == acc.max ? 1 : std::exp(v - acc.max);  // v == max also covers +-inf
    }
  }
  void merge(Acc& acc, const Acc& other) const {
    if (other.max > acc.max) {
      acc.sum = acc.sum * std::exp(acc.max - other.max) + other.sum;
      acc.max = other.max;
    } else {
      acc.sum += other.max == acc.max ? other.sum : other.sum * std::exp(other.max - acc.max);
    }
  }
  T finish(const Acc& acc, int64_t) const { return static_cast<T>(acc.max + std::log(acc.sum)); }
};

// The formula as written: for each output, its max, then the sum of exp(x - max).
template <typename T>
void reference_logsumexp(const Tensor& out, const Tensor& x, const Shape& dims) {
  kernels::reference_reduce_each<T>(out, x, dims, [](auto at, int64_t count) {
    double m = -INFINITY;
    for (int64_t j = 0; j < count; ++j) m = std::max(m, at(j));
    if (!std::isfinite(m)) return m;  // all -inf (empty sum), or an inf that dominates
    double s = 0;
    for (int64_t j = 0; j < count; ++j) s += std::exp(at(j) - m);
    return m + std::log(s);
  });
}
}  // namespace

namespace {
template <typename T>
void logsumexp_fast(const Tensor& out, const Tensor& x, const Shape& dims) {
  kernels::reduce_loop<T, T>(out, x, dims, LogSumExpReducer<T>{});
}
template <typename T>
void register_for() {
  register_kernel<kernels::ReduceKernel>("logsumexp", DeviceType::cpu, dtype_of<T>(), logsumexp_fast<T>,
                                         reference_logsumexp<T>);
}
}  // namespace

LOOM_KERNELS(cpu_logsumexp) {
  kernels::for_each_type(FloatingTypes{}, [](auto tag) { register_for<typename decltype(tag)::type>(); });
}

}  // namespace loom
