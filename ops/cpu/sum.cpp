// CPU kernels of sum (ops/src/sum.cpp): the reduction engine (kernels/reduce.h)
// with vector partial sums, and the plain reference reduction.
#include <vector>

#include "loom/kernel_table.h"
#include "loom/kernels/reduce.h"
#include "loom/ops/kernel_signatures.h"
#include "type_lists.h"
#include "loom/kernels/span_sum.h"

namespace loom {

namespace {
// Floats (bfloat16 too) accumulate in double: a long sum loses no precision to rounding.
// The fast paths keep short float partials (at most 16 values each) in vector
// registers and add them into the double accumulator in a fixed order.
template <typename T>
struct SumReducer {
  using Acc = std::conditional_t<std::is_integral_v<T>, int64_t, double>;
  Acc init() const { return 0; }
  void add(Acc& acc, T v) const { acc += v; }
  // Unit-stride runs (e.g. a sum over the contiguous last dim): kernels::span_sum's
  // 4 vector accumulators in blocks of 256; integers: several independent partial sums.
  void add_span(Acc& acc, const T* p, int64_t n) const {
    if constexpr (std::is_floating_point_v<T>)
      acc += kernels::span_sum(p, n);
    else
      kernels::add_span_lanes(*this, acc, p, n);
  }
  // A column sum: a block of up to kRowBlock rows summed per column in T, row by
  // row (8 vectors of columns in registers at a time), then added into acc in double.
  void add_rows(Acc* acc, const T* const* rows, int64_t nrows, int64_t width) const {
    if constexpr (std::is_same_v<T, bfloat16>) {  // per column, the block's rows summed in float32, in order
      thread_local std::vector<float> partial;
      partial.assign(static_cast<size_t>(width), 0.0f);
      float* p = partial.data();
      for (int64_t k = 0; k < nrows; ++k) {
        const bfloat16* row = rows[k];
#pragma omp simd
        for (int64_t c = 0; c < width; ++c) p[c] += float(row[c]);
      }
      for (int64_t c = 0; c < width; ++c) acc[c] += p[c];
      return;
    }
    int64_t c = 0;
    if constexpr (std::is_floating_point_v<T>) {
      using V = kernels::vec_t<T>;
      constexpr int64_t L = kernels::Vec<T>::lanes;
      const kernels::VecLoad load;
      for (; c + 8 * L <= width; c += 8 * L) {
        V a0{}, a1{}, a2{}, a3{}, a4{}, a5{}, a6{}, a7{};
        for (int64_t k = 0; k < nrows; ++k) {
          const T* p = rows[k] + c;
          a0 += load(p, 0), a1 += load(p, L), a2 += load(p, 2 * L), a3 += load(p, 3 * L);
          a4 += load(p, 4 * L), a5 += load(p, 5 * L), a6 += load(p, 6 * L), a7 += load(p, 7 * L);
        }
        const V parts[8] = {a0, a1, a2, a3, a4, a5, a6, a7};
        for (int64_t u = 0; u < 8; ++u)
          for (int64_t l = 0; l < L; ++l) acc[c + u * L + l] += parts[u][l];
      }
    }
    for (; c < width; ++c) {  // the same per-column order as the vector lanes (integers: exact in Acc)
      std::conditional_t<std::is_floating_point_v<T>, T, Acc> s = 0;
      for (int64_t k = 0; k < nrows; ++k) s += rows[k][c];
      acc[c] += s;
    }
  }
  void merge(Acc& acc, const Acc& other) const { acc += other; }
  T finish(const Acc& acc, int64_t) const { return static_cast<T>(acc); }
};
}  // namespace

namespace {
template <typename T>
void sum_fast(const Tensor& out, const Tensor& x, const Shape& dims) {
  kernels::reduce_loop<T, T>(out, x, dims, SumReducer<T>{});
}
template <typename T>
void sum_reference(const Tensor& out, const Tensor& x, const Shape& dims) {
  kernels::reference_reduce<T, T>(out, x, dims, SumReducer<T>{});
}
template <typename T>
void register_for() {
  register_kernel<kernels::ReduceKernel>("sum", DeviceType::cpu, dtype_of<T>(), sum_fast<T>, sum_reference<T>);
}
}  // namespace

LOOM_KERNELS(cpu_sum) {
  kernels::for_each_type(NumericTypesBf16{}, [](auto tag) { register_for<typename decltype(tag)::type>(); });
}

}  // namespace loom
