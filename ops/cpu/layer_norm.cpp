// CPU kernels of layer_norm and its fused backward (layer_norm_backward,
// layer_norm_param_grads; ops/src/layer_norm.cpp, layer_norm_backward.cpp): the
// fast kernels and the plain reference kernels beside them, a teaching pair.
// Determinism: dx is computed row by row (one thread per row); dw and db sum fixed
// blocks of kParamRows rows into per-block partials, merged in block order in double,
// so the bits never depend on the thread count.
#include <algorithm>
#include <cmath>
#include <vector>

#include "loom/kernel_table.h"
#include "loom/ops/kernel_signatures.h"
#include "type_lists.h"
#include "loom/kernels/span_sum.h"
#include "row_loops.h"
#include "dropout_add_layer_norm.h"

namespace loom {

namespace {

using detail::data_or_null;
using detail::RowShape;

template <typename T>
struct RowStats {
  T mean, rstd;
};

// Two passes (mean, then the centered sum of squares): stable for large offsets.
// Both are kernels::span_sum (vector lanes, fixed blocks, double across blocks).
template <typename T>
RowStats<T> row_stats(const T* xr, int64_t n, double eps) {
  const T mu = static_cast<T>(kernels::span_sum(xr, n) / static_cast<double>(n));
  double squares = kernels::span_sum<T>(n, [&](int64_t j, auto load) {
    auto d = load(xr, j) - mu;
    return d * d;
  });
  return {mu, static_cast<T>(1.0 / std::sqrt(squares / static_cast<double>(n) + eps))};
}

// The reference kernels' statistics: plain loops in double, mean then variance.
template <typename T>
RowStats<double> reference_row_stats(const T* xr, int64_t n, double eps) {
  double mean = 0, var = 0;
  for (int64_t j = 0; j < n; ++j) mean += xr[j];
  mean /= static_cast<double>(n);
  for (int64_t j = 0; j < n; ++j) var += (xr[j] - mean) * (xr[j] - mean);
  var /= static_cast<double>(n);
  return {mean, 1.0 / std::sqrt(var + eps)};
}

template <typename T>
T* mutable_data_or_null(const Tensor& t) {
  return t.defined() ? t.data<T>() : nullptr;
}

// ---- forward ----

// Also writes each row's (mean, rstd) to `stats`, for the backward.
template <typename T>
void layer_norm_fast(T* out, T* stats, const T* x, const T* w, const T* b, RowShape s, double eps) {
  const int64_t n = s.size;
  detail::parallel_rows(s.rows, n, [&](int64_t r) {
    const T* xr = x + r * n;
    T* o = out + r * n;
    RowStats<T> st = row_stats(xr, n, eps);
    stats[2 * r] = st.mean;
    stats[2 * r + 1] = st.rstd;
    if (w && b) {
#pragma omp simd
      for (int64_t j = 0; j < n; ++j) o[j] = (xr[j] - st.mean) * st.rstd * w[j] + b[j];
    } else if (w) {
#pragma omp simd
      for (int64_t j = 0; j < n; ++j) o[j] = (xr[j] - st.mean) * st.rstd * w[j];
    } else if (b) {
#pragma omp simd
      for (int64_t j = 0; j < n; ++j) o[j] = (xr[j] - st.mean) * st.rstd + b[j];
    } else {
#pragma omp simd
      for (int64_t j = 0; j < n; ++j) o[j] = (xr[j] - st.mean) * st.rstd;
    }
  });
}

// Reference: the statistics in double, then each output; (mean, rstd) saved as well.
template <typename T>
void layer_norm_reference(T* out, T* stats, const T* x, const T* w, const T* b, RowShape s, double eps) {
  const int64_t n = s.size;
  for (int64_t r = 0; r < s.rows; ++r) {
    const T* xr = x + r * n;
    const auto [mean, rstd] = reference_row_stats(xr, n, eps);
    stats[2 * r] = static_cast<T>(mean);
    stats[2 * r + 1] = static_cast<T>(rstd);
    for (int64_t j = 0; j < n; ++j) {
      double y = (xr[j] - mean) * rstd;
      if (w) y *= w[j];
      if (b) y += b[j];
      out[r * n + j] = static_cast<T>(y);
    }
  }
}

// ---- backward ----

// Rows per block of the dw/db partial sums: fixed (never derived from the thread count).
constexpr int64_t kParamRows = 32;

int64_t param_blocks(int64_t rows) { return (rows + kParamRows - 1) / kParamRows; }

// One sweep per row: stats (the forward's saved (mean, rstd) per row when given:
// the same bits row_stats gives), the two sums of dx (if kDx), then dx and the
// block's dw/db partials (if kParams, in T within the block) in one elementwise
// loop. `partial` holds param_blocks(rows) blocks of [2, D].
template <typename T, bool kDx, bool kParams>
void grads_fast(T* dx, T* partial, const T* x, const T* w, const T* g, const T* stats, RowShape s, double eps) {
  const int64_t n = s.size, rows = s.rows, blocks = param_blocks(rows);
  std::vector<T> ones;  // no weight: a = g * 1, exact
  if (!w) {
    ones.assign(n, T(1));
    w = ones.data();
  }
  const bool parallel = blocks > 1 && rows * n >= kernels::kParallelGrain && !omp_in_parallel();
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t b = 0; b < blocks; ++b) {
    T* pw = kParams ? partial + b * 2 * n : nullptr;
    T* pb = kParams ? pw + n : nullptr;
    if constexpr (kParams) std::fill(pw, pw + 2 * n, T(0));
    for (int64_t r = b * kParamRows; r < std::min(rows, (b + 1) * kParamRows); ++r) {
      const T* xr = x + r * n;
      const T* gr = g + r * n;
      const RowStats<T> st = stats ? RowStats<T>{stats[2 * r], stats[2 * r + 1]} : row_stats(xr, n, eps);
      const T mu = st.mean, rstd = st.rstd;
      T mean_a = 0, mean_axh = 0;
      if constexpr (kDx) {
        auto [sum_a, sum_axh] = kernels::span_sum2<T>(n, [&](int64_t j, auto load) {
          auto a = load(gr, j) * load(w, j);
          return std::pair{a, a * ((load(xr, j) - mu) * rstd)};
        });
        mean_a = static_cast<T>(sum_a / static_cast<double>(n));
        mean_axh = static_cast<T>(sum_axh / static_cast<double>(n));
      }
      T* o = kDx ? dx + r * n : nullptr;
#pragma omp simd
      for (int64_t j = 0; j < n; ++j) {
        const T xh = (xr[j] - mu) * rstd;
        if constexpr (kDx) o[j] = rstd * (gr[j] * w[j] - mean_a - xh * mean_axh);
        if constexpr (kParams) {
          pw[j] += gr[j] * xh;
          pb[j] += gr[j];
        }
      }
    }
  }
}

// [dw; db] from the block partials: for each entry, the blocks in order, in double.
template <typename T>
void merge_param_partials(T* out, const T* partial, int64_t blocks, int64_t n) {
  std::vector<double> acc(2 * n, 0.0);
  for (int64_t b = 0; b < blocks; ++b)
    for (int64_t j = 0; j < 2 * n; ++j) acc[j] += partial[b * 2 * n + j];
  for (int64_t j = 0; j < 2 * n; ++j) out[j] = static_cast<T>(acc[j]);
}

// The plain references: one row at a time, everything in double.
template <typename T>
void dx_reference(T* out, const T* x, const T* w, const T* g, RowShape s, double eps) {
  const int64_t n = s.size;
  std::vector<double> xh(n), a(n);
  for (int64_t r = 0; r < s.rows; ++r) {
    const auto [mean, rstd] = reference_row_stats(x + r * n, n, eps);
    double mean_a = 0, mean_axh = 0;
    for (int64_t j = 0; j < n; ++j) {
      xh[j] = (x[r * n + j] - mean) * rstd;
      a[j] = g[r * n + j] * (w ? w[j] : T(1));
      mean_a += a[j] / static_cast<double>(n);
      mean_axh += a[j] * xh[j] / static_cast<double>(n);
    }
    for (int64_t j = 0; j < n; ++j) out[r * n + j] = static_cast<T>(rstd * (a[j] - mean_a - xh[j] * mean_axh));
  }
}

template <typename T>
void param_grads_reference(T* out, const T* x, const T* g, RowShape s, double eps) {
  const int64_t n = s.size;
  std::vector<double> dw(n, 0.0), db(n, 0.0);
  for (int64_t r = 0; r < s.rows; ++r) {
    const auto [mean, rstd] = reference_row_stats(x + r * n, n, eps);
    for (int64_t j = 0; j < n; ++j) {
      dw[j] += g[r * n + j] * ((x[r * n + j] - mean) * rstd);
      db[j] += g[r * n + j];
    }
  }
  for (int64_t j = 0; j < n; ++j) {
    out[j] = static_cast<T>(dw[j]);
    out[n + j] = static_cast<T>(db[j]);
  }
}

// ---- the kernels in the table ----

template <typename T>
void layer_norm_fast_kernel(const Tensor& out, const Tensor& stats, const Tensor& x, const Tensor& weight,
                            const Tensor& bias, double eps) {
  layer_norm_fast<T>(out.data<T>(), stats.data<T>(), x.data<T>(), data_or_null<T>(weight), data_or_null<T>(bias),
                     detail::row_shape(x), eps);
}
template <typename T>
void layer_norm_reference_kernel(const Tensor& out, const Tensor& stats, const Tensor& x, const Tensor& weight,
                                 const Tensor& bias, double eps) {
  layer_norm_reference<T>(out.data<T>(), stats.data<T>(), x.data<T>(), data_or_null<T>(weight), data_or_null<T>(bias),
                          detail::row_shape(x), eps);
}

// The partials come from the caching allocator on x's device, like any temporary.
template <typename T>
void grads_fast_kernel(const Tensor& dx, const Tensor& params, const Tensor& x, const Tensor& weight,
                       const Tensor& grad, const Tensor& stats, double eps) {
  const RowShape s = detail::row_shape(x);
  const int64_t blocks = param_blocks(s.rows), d = s.size;
  const bool want_dx = dx.defined(), want_params = params.defined();
  Tensor partial = want_params ? Tensor::empty({blocks, 2, d}, {x.dtype(), x.device()}) : Tensor();
  T* pp = mutable_data_or_null<T>(partial);
  auto run = !want_params ? grads_fast<T, true, false>
             : want_dx    ? grads_fast<T, true, true>
                          : grads_fast<T, false, true>;
  run(mutable_data_or_null<T>(dx), pp, x.data<T>(), data_or_null<T>(weight), grad.data<T>(), data_or_null<T>(stats), s,
      eps);
  if (want_params) merge_param_partials(params.data<T>(), pp, blocks, d);
}

// The reference recomputes the statistics in double (stats unused).
template <typename T>
void grads_reference_kernel(const Tensor& dx, const Tensor& params, const Tensor& x, const Tensor& weight,
                            const Tensor& grad, const Tensor&, double eps) {
  const RowShape s = detail::row_shape(x);
  if (dx.defined()) dx_reference<T>(dx.data<T>(), x.data<T>(), data_or_null<T>(weight), grad.data<T>(), s, eps);
  if (params.defined()) param_grads_reference<T>(params.data<T>(), x.data<T>(), grad.data<T>(), s, eps);
}

template <typename T>
void register_for() {
  register_kernel<kernels::LayerNormKernel>("layer_norm", DeviceType::cpu, dtype_of<T>(), layer_norm_fast_kernel<T>,
                                            layer_norm_reference_kernel<T>);
  // One sweep serves both backward ops (dx, [dw; db] or both at once): one kernel under each name.
  for (const char* op : {"layer_norm_backward", "layer_norm_param_grads"})
    register_kernel<kernels::LayerNormBackwardKernel>(op, DeviceType::cpu, dtype_of<T>(), grads_fast_kernel<T>,
                                                      grads_reference_kernel<T>);
}

}  // namespace

namespace detail {
template <typename T>
void layer_norm_rows_fast(T* out, T* stats, const T* x, const T* w, const T* b, RowShape s, double eps) {
  layer_norm_fast<T>(out, stats, x, w, b, s, eps);
}
template <typename T>
void layer_norm_rows_reference(T* out, T* stats, const T* x, const T* w, const T* b, RowShape s, double eps) {
  layer_norm_reference<T>(out, stats, x, w, b, s, eps);
}
#define LOOM_LAYER_NORM_ROWS(T)                                                                  \
  template void layer_norm_rows_fast<T>(T*, T*, const T*, const T*, const T*, RowShape, double); \
  template void layer_norm_rows_reference<T>(T*, T*, const T*, const T*, const T*, RowShape, double);
LOOM_LAYER_NORM_ROWS(float)
LOOM_LAYER_NORM_ROWS(double)
#undef LOOM_LAYER_NORM_ROWS
}  // namespace detail

LOOM_KERNELS(cpu_layer_norm) {
  kernels::for_each_type(FloatingTypes{}, [](auto tag) { register_for<typename decltype(tag)::type>(); });
}

}  // namespace loom
