// CPU kernels of softmax and softmax_backward (ops/src/softmax.cpp): the fast
// kernel and the plain reference kernel beside it, a teaching pair.
#include <cmath>

#include "loom/kernel_table.h"
#include "loom/ops/kernel_signatures.h"
#include "type_lists.h"
#include "short_rows.h"

namespace loom {

namespace {

using detail::MaskKind;
using detail::RowMask;
using detail::RowShape;

// Fast, float32 rows of at most kShortRow (attention): rows held as vectors, in groups.
template <MaskKind K>
void softmax_short_rows(float* out, const float* x, const RowMask& mask, RowShape s) {
  const int64_t n = s.size;
  detail::softmax_row_groups<K, /*KeepExp=*/true>(x, mask, s, [&](detail::RowGroup& g) {
    const kernels::f32x8 inv = 1.0f / g.totals;
    for (int64_t i = 0; i < g.count; ++i) {
      float* yr = out + (g.first + i) * n;
      if (g.max[i] == detail::kNegInf<float>) {  // fully masked row: zeros, not 0/0
        std::fill_n(yr, n, 0.0f);
        continue;
      }
      detail::VectorRow& row = g.rows[i];
      for (int64_t c = 0; c < row.count; ++c) row.lanes[c] *= inv[i];
      row.store(yr);
    }
  });
}

// Fast: three passes over a row kept in cache (logits + max, exp + sum, scale), in place in `out`.
template <typename T, MaskKind K>
void softmax_fast(T* out, const T* x, const RowMask& mask, RowShape s) {
  const int64_t n = s.size;
  if constexpr (std::is_same_v<T, float>)
    if (n <= detail::kShortRow) return softmax_short_rows<K>(out, x, mask, s);
  detail::with_mask_step(mask, [&](auto step) {
    detail::parallel_rows(s.rows, n, [&](int64_t r) {
      const T* xr = x + r * n;
      T* yr = out + r * n;
      const void* mr = detail::mask_row_ptr<T>(mask, r);
      T mx = detail::kNegInf<T>;
#pragma omp simd reduction(max : mx)
      for (int64_t j = 0; j < n; ++j) {
        T z = detail::masked_logit<K>(xr[j], mr, step, j);
        yr[j] = z;
        mx = z > mx ? z : mx;
      }
      detail::prefetch_next_row(xr, r, s);
      if (mx == detail::kNegInf<T>) {  // fully masked row: zeros, not 0/0
        for (int64_t j = 0; j < n; ++j) yr[j] = T(0);
        return;
      }
      // exp and its sum in one vector loop (float32: row_sums.cpp, AVX-512 where the CPU has it).
      const double total = detail::row_sum_exp(yr, n, mx, yr);
      const T inv = static_cast<T>(1.0 / total);
#pragma omp simd
      for (int64_t j = 0; j < n; ++j) yr[j] *= inv;
    });
  });
}

// Reference: for each row, the max, the sum of exponentials, then each output.
template <typename T, MaskKind K>
void softmax_reference(T* out, const T* x, const RowMask& mask, RowShape s) {
  const int64_t n = s.size;
  for (int64_t r = 0; r < s.rows; ++r) {
    const void* mr = detail::mask_row_ptr<T>(mask, r);
    auto z = [&](int64_t j) { return detail::masked_logit<K>(x[r * n + j], mr, mask.step, j); };
    T mx = detail::kNegInf<T>;
    for (int64_t j = 0; j < n; ++j) mx = std::max(mx, z(j));
    double total = 0;
    if (mx != detail::kNegInf<T>)
      for (int64_t j = 0; j < n; ++j) total += std::exp(z(j) - mx);
    for (int64_t j = 0; j < n; ++j)
      out[r * n + j] = mx == detail::kNegInf<T> ? T(0) : static_cast<T>(std::exp(z(j) - mx) / total);
  }
}

// Fast backward: one pass for sum(g * y), one for the output.
template <typename T>
void softmax_backward_fast(T* out, const T* y, const T* g, RowShape s) {
  const int64_t n = s.size;
  detail::parallel_rows(s.rows, n, [&](int64_t r) {
    const T* yr = y + r * n;
    const T* gr = g + r * n;
    T* o = out + r * n;
    double dot = 0;
#pragma omp simd reduction(+ : dot)
    for (int64_t j = 0; j < n; ++j) dot += gr[j] * yr[j];
    detail::prefetch_next_row(yr, r, s);
    detail::prefetch_next_row(gr, r, s);
    const T d = static_cast<T>(dot);
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) o[j] = yr[j] * (gr[j] - d);
  });
}

template <typename T>
void softmax_backward_reference(T* out, const T* y, const T* g, RowShape s) {
  const int64_t n = s.size;
  for (int64_t r = 0; r < s.rows; ++r) {
    double dot = 0;
    for (int64_t j = 0; j < n; ++j) dot += g[r * n + j] * y[r * n + j];
    for (int64_t j = 0; j < n; ++j) out[r * n + j] = y[r * n + j] * (g[r * n + j] - static_cast<T>(dot));
  }
}

template <typename T>
void softmax_fast_kernel(const Tensor& out, const Tensor& x, const Tensor& mask) {
  detail::run_masked_rows<T>(out, x, mask, [](auto kind, T* y, const T* xs, const RowMask& m, RowShape s) {
    softmax_fast<T, decltype(kind)::value>(y, xs, m, s);
  });
}
template <typename T>
void softmax_reference_kernel(const Tensor& out, const Tensor& x, const Tensor& mask) {
  detail::run_masked_rows<T>(out, x, mask, [](auto kind, T* y, const T* xs, const RowMask& m, RowShape s) {
    softmax_reference<T, decltype(kind)::value>(y, xs, m, s);
  });
}
template <typename T>
void softmax_backward_fast_kernel(const Tensor& out, const Tensor& y, const Tensor& g) {
  softmax_backward_fast<T>(out.data<T>(), y.data<T>(), g.data<T>(), detail::row_shape(y));
}
template <typename T>
void softmax_backward_reference_kernel(const Tensor& out, const Tensor& y, const Tensor& g) {
  softmax_backward_reference<T>(out.data<T>(), y.data<T>(), g.data<T>(), detail::row_shape(y));
}

template <typename T>
void register_for() {
  register_kernel<kernels::MaskedRowsKernel>("softmax", DeviceType::cpu, dtype_of<T>(), softmax_fast_kernel<T>,
                                             softmax_reference_kernel<T>);
  register_kernel<kernels::RowBackwardKernel>("softmax_backward", DeviceType::cpu, dtype_of<T>(),
                                              softmax_backward_fast_kernel<T>, softmax_backward_reference_kernel<T>);
}

}  // namespace

LOOM_KERNELS(cpu_softmax) {
  kernels::for_each_type(FloatingTypes{}, [](auto tag) { register_for<typename decltype(tag)::type>(); });
  // bfloat16: chunks of rows widened, float32's loops on them, results rounded once.
  auto rows = [](auto kind, bool fast, float* y, const float* x, const RowMask& m, RowShape s) {
    constexpr detail::MaskKind K = decltype(kind)::value;
    fast ? softmax_fast<float, K>(y, x, m, s) : softmax_reference<float, K>(y, x, m, s);
  };
  detail::register_bf16_row_kernels<decltype(rows), softmax_backward_fast<float>, softmax_backward_reference<float>>(
      "softmax", "softmax_backward");
}

}  // namespace loom
