// CPU kernels of log_softmax and log_softmax_backward (ops/src/log_softmax.cpp):
// the fast kernel and the plain reference kernel beside it.
#include <cmath>

#include "loom/kernel_table.h"
#include "loom/ops/kernel_signatures.h"
#include "type_lists.h"
#include "short_rows.h"

namespace loom {

namespace {

using detail::kNegInf;
using detail::MaskKind;
using detail::RowMask;
using detail::RowShape;

// Fast, float32 rows of at most kShortRow (attention): rows held as vectors, in groups.
template <MaskKind K>
void log_softmax_short_rows(float* out, const float* x, const RowMask& mask, RowShape s) {
  const int64_t n = s.size;
  detail::softmax_row_groups<K, /*KeepExp=*/false>(x, mask, s, [&](detail::RowGroup& g) {
    const kernels::f32x8 log_totals = kernels::log_approx(g.totals);
    for (int64_t i = 0; i < g.count; ++i) {
      detail::VectorRow& row = g.rows[i];
      // (z - max) - log(total), not z - (max + log(total)): at |z| ~ 1e4 the
      // sum would round away log(total). A fully masked row stays all -inf.
      if (g.max[i] != kNegInf<float>)
        for (int64_t c = 0; c < row.count; ++c) row.lanes[c] = (row.lanes[c] - g.max[i]) - log_totals[i];
      row.store(out + (g.first + i) * n);
    }
  });
}

// Fast: logits + max, sum of exponentials, then shift, all in `out`'s row.
template <typename T, MaskKind K>
void log_softmax_fast(T* out, const T* x, const RowMask& mask, RowShape s) {
  const int64_t n = s.size;
  if constexpr (std::is_same_v<T, float>)
    if (n <= detail::kShortRow) return log_softmax_short_rows<K>(out, x, mask, s);
  detail::with_mask_step(mask, [&](auto step) {
    detail::parallel_rows(s.rows, n, [&](int64_t r) {
      const T* xr = x + r * n;
      T* yr = out + r * n;
      const void* mr = detail::mask_row_ptr<T>(mask, r);
      T mx = kNegInf<T>;
#pragma omp simd reduction(max : mx)
      for (int64_t j = 0; j < n; ++j) {
        T z = detail::masked_logit<K>(xr[j], mr, step, j);
        yr[j] = z;
        mx = z > mx ? z : mx;
      }
      detail::prefetch_next_row(xr, r, s);
      if (mx == kNegInf<T>) return;  // fully masked row: already all -inf
      const T log_total = static_cast<T>(std::log(detail::row_sum_exp(yr, n, mx)));
#pragma omp simd
      for (int64_t j = 0; j < n; ++j) yr[j] = (yr[j] - mx) - log_total;
    });
  });
}

template <typename T, MaskKind K>
void log_softmax_reference(T* out, const T* x, const RowMask& mask, RowShape s) {
  const int64_t n = s.size;
  for (int64_t r = 0; r < s.rows; ++r) {
    const void* mr = detail::mask_row_ptr<T>(mask, r);
    auto z = [&](int64_t j) { return detail::masked_logit<K>(x[r * n + j], mr, mask.step, j); };
    T mx = kNegInf<T>;
    for (int64_t j = 0; j < n; ++j) mx = std::max(mx, z(j));
    double total = 0;
    if (mx != kNegInf<T>)
      for (int64_t j = 0; j < n; ++j) total += std::exp(z(j) - mx);
    for (int64_t j = 0; j < n; ++j)
      out[r * n + j] = mx == kNegInf<T> ? kNegInf<T> : static_cast<T>((z(j) - mx) - std::log(total));
  }
}

template <typename T>
void log_softmax_backward_fast(T* out, const T* y, const T* g, RowShape s) {
  const int64_t n = s.size;
  detail::parallel_rows(s.rows, n, [&](int64_t r) {
    const T* yr = y + r * n;
    const T* gr = g + r * n;
    T* o = out + r * n;
    const T t =
        static_cast<T>(detail::blocked_row_sum<T>(n, [&](int64_t j) { return yr[j] == kNegInf<T> ? T(0) : gr[j]; }));
    detail::prefetch_next_row(yr, r, s);
    detail::prefetch_next_row(gr, r, s);
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) o[j] = yr[j] == kNegInf<T> ? T(0) : gr[j] - detail::exp_below_max(yr[j]) * t;
  });
}

template <typename T>
void log_softmax_backward_reference(T* out, const T* y, const T* g, RowShape s) {
  const int64_t n = s.size;
  for (int64_t r = 0; r < s.rows; ++r) {
    double total = 0;  // sum of g over the unmasked entries
    for (int64_t j = 0; j < n; ++j)
      if (y[r * n + j] != kNegInf<T>) total += g[r * n + j];
    for (int64_t j = 0; j < n; ++j) {
      bool masked = y[r * n + j] == kNegInf<T>;
      out[r * n + j] = masked ? T(0) : g[r * n + j] - std::exp(y[r * n + j]) * static_cast<T>(total);
    }
  }
}

template <typename T>
void log_softmax_fast_kernel(const Tensor& out, const Tensor& x, const Tensor& mask) {
  detail::run_masked_rows<T>(out, x, mask, [](auto kind, T* y, const T* xs, const RowMask& m, RowShape s) {
    log_softmax_fast<T, decltype(kind)::value>(y, xs, m, s);
  });
}
template <typename T>
void log_softmax_reference_kernel(const Tensor& out, const Tensor& x, const Tensor& mask) {
  detail::run_masked_rows<T>(out, x, mask, [](auto kind, T* y, const T* xs, const RowMask& m, RowShape s) {
    log_softmax_reference<T, decltype(kind)::value>(y, xs, m, s);
  });
}
template <typename T>
void log_softmax_backward_fast_kernel(const Tensor& out, const Tensor& y, const Tensor& g) {
  log_softmax_backward_fast<T>(out.data<T>(), y.data<T>(), g.data<T>(), detail::row_shape(y));
}
template <typename T>
void log_softmax_backward_reference_kernel(const Tensor& out, const Tensor& y, const Tensor& g) {
  log_softmax_backward_reference<T>(out.data<T>(), y.data<T>(), g.data<T>(), detail::row_shape(y));
}

template <typename T>
void register_for() {
  register_kernel<kernels::MaskedRowsKernel>("log_softmax", DeviceType::cpu, dtype_of<T>(), log_softmax_fast_kernel<T>,
                                             log_softmax_reference_kernel<T>);
  register_kernel<kernels::RowBackwardKernel>("log_softmax_backward", DeviceType::cpu, dtype_of<T>(),
                                              log_softmax_backward_fast_kernel<T>,
                                              log_softmax_backward_reference_kernel<T>);
}

}  // namespace

LOOM_KERNELS(cpu_log_softmax) {
  kernels::for_each_type(FloatingTypes{}, [](auto tag) { register_for<typename decltype(tag)::type>(); });
  // bfloat16: chunks of rows widened, float32's loops on them, results rounded once.
  auto rows = [](auto kind, bool fast, float* y, const float* x, const RowMask& m, RowShape s) {
    constexpr detail::MaskKind K = decltype(kind)::value;
    fast ? log_softmax_fast<float, K>(y, x, m, s) : log_softmax_reference<float, K>(y, x, m, s);
  };
  detail::register_bf16_row_kernels<decltype(rows), log_softmax_backward_fast<float>,
                                    log_softmax_backward_reference<float>>("log_softmax", "log_softmax_backward");
}

}  // namespace loom
