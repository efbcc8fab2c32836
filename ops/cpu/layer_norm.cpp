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
  for (int64_t j = 0; j < n; ++j) mean += double(xr[j]);
  mean /= static_cast<double>(n);
  for (int64_t j = 0; j < n; ++j) var += (double(xr[j]) - mean) * (double(xr[j]) - mean);
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
template <typename T, typename C = compute_type<T>>
void layer_norm_reference(T* out, C* stats, const T* x, const C* w, const C* b, RowShape s, double eps) {
  const int64_t n = s.size;
  for (int64_t r = 0; r < s.rows; ++r) {
    const T* xr = x + r * n;
    const auto [mean, rstd] = reference_row_stats(xr, n, eps);
    stats[2 * r] = static_cast<C>(mean);
    stats[2 * r + 1] = static_cast<C>(rstd);
    for (int64_t j = 0; j < n; ++j) {
      double y = (double(xr[j]) - mean) * rstd;
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
template <typename Out, typename T>
void merge_param_partials(Out* out, const T* partial, int64_t blocks, int64_t n) {
  std::vector<double> acc(2 * n, 0.0);
  for (int64_t b = 0; b < blocks; ++b)
    for (int64_t j = 0; j < 2 * n; ++j) acc[j] += partial[b * 2 * n + j];
  for (int64_t j = 0; j < 2 * n; ++j) out[j] = static_cast<Out>(acc[j]);
}

// The plain references: one row at a time, everything in double.
template <typename T>
void dx_reference(T* out, const T* x, const compute_type<T>* w, const T* g, RowShape s, double eps) {
  const int64_t n = s.size;
  std::vector<double> xh(n), a(n);
  for (int64_t r = 0; r < s.rows; ++r) {
    const auto [mean, rstd] = reference_row_stats(x + r * n, n, eps);
    double mean_a = 0, mean_axh = 0;
    for (int64_t j = 0; j < n; ++j) {
      xh[j] = (double(x[r * n + j]) - mean) * rstd;
      a[j] = double(g[r * n + j]) * (w ? double(w[j]) : 1.0);
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
      dw[j] += double(g[r * n + j]) * ((double(x[r * n + j]) - mean) * rstd);
      db[j] += double(g[r * n + j]);
    }
  }
  for (int64_t j = 0; j < n; ++j) {
    out[j] = static_cast<T>(dw[j]);
    out[n + j] = static_cast<T>(db[j]);
  }
}

// ---- bfloat16: rows widened into float32 scratch, float32's loops run on them,
// results rounded once; statistics and the dw/db partials stay float32 ----

using detail::narrow;
using detail::widen;

void layer_norm_bf16_fast(bfloat16* out, float* stats, const bfloat16* x, const float* w, const float* b, RowShape s,
                          double eps) {
  const int64_t n = s.size;
  detail::for_each_row_chunk(s, [&](int64_t, int64_t first, int64_t count) {
    float* rows = detail::row_scratch(2 * count * n);
    widen(x + first * n, count * n, rows);
    layer_norm_fast<float>(rows + count * n, stats + 2 * first, rows, w, b, RowShape{count, n}, eps);
    narrow(rows + count * n, count * n, out + first * n);
  });
}

// grads_fast's blocks of kParamRows rows, each widened, run by float32's sweep.
template <bool kDx, bool kParams>
void grads_bf16(bfloat16* dx, float* partial, const bfloat16* x, const float* w, const bfloat16* g, const float* stats,
                RowShape s, double eps) {
  const int64_t n = s.size, rows = s.rows, blocks = param_blocks(rows);
  const bool parallel = blocks > 1 && rows * n >= kernels::kParallelGrain && !omp_in_parallel();
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t first = b * kParamRows, count = std::min(kParamRows, rows - first);
    float* xs = detail::row_scratch(3 * count * n);
    float *gs = xs + count * n, *dxs = gs + count * n;
    widen(x + first * n, count * n, xs);
    widen(g + first * n, count * n, gs);
    grads_fast<float, kDx, kParams>(dxs, kParams ? partial + b * 2 * n : nullptr, xs, w, gs,
                                    stats ? stats + 2 * first : nullptr, RowShape{count, n}, eps);
    if constexpr (kDx) narrow(dxs, count * n, dx + first * n);
  }
}

// ---- the kernels in the table ----

template <typename T>
void layer_norm_fast_kernel(const Tensor& out, const Tensor& stats, const Tensor& x, const Tensor& weight,
                            const Tensor& bias, double eps) {
  const detail::ParamData<T> w(weight), b(bias);
  if constexpr (std::is_same_v<T, bfloat16>)
    layer_norm_bf16_fast(out.data<T>(), stats.data<float>(), x.data<T>(), w.get(), b.get(), detail::row_shape(x), eps);
  else
    layer_norm_fast<T>(out.data<T>(), stats.data<T>(), x.data<T>(), w.get(), b.get(), detail::row_shape(x), eps);
}

template <typename T>
void layer_norm_reference_kernel(const Tensor& out, const Tensor& stats, const Tensor& x, const Tensor& weight,
                                 const Tensor& bias, double eps) {
  const detail::ParamData<T> w(weight), b(bias);
  layer_norm_reference<T>(out.data<T>(), stats.data<compute_type<T>>(), x.data<T>(), w.get(), b.get(),
                          detail::row_shape(x), eps);
}

// The partials (compute_type<T>) come from the caching allocator on x's device, like any temporary.
template <typename T>
void grads_fast_kernel(const Tensor& dx, const Tensor& params, const Tensor& x, const Tensor& weight,
                       const Tensor& grad, const Tensor& stats, double eps) {
  using C = compute_type<T>;
  const RowShape s = detail::row_shape(x);
  const int64_t blocks = param_blocks(s.rows), d = s.size;
  const bool want_dx = dx.defined(), want_params = params.defined();
  Tensor partial = want_params ? Tensor::empty({blocks, 2, d}, {dtype_of<C>(), x.device()}) : Tensor();
  C* pp = mutable_data_or_null<C>(partial);
  const detail::ParamData<T> w(weight);
  if constexpr (std::is_same_v<T, bfloat16>) {
    auto run = !want_params ? grads_bf16<true, false> : want_dx ? grads_bf16<true, true> : grads_bf16<false, true>;
    run(mutable_data_or_null<T>(dx), pp, x.data<T>(), w.get(), grad.data<T>(), data_or_null<C>(stats), s, eps);
  } else {
    auto run = !want_params ? grads_fast<T, true, false>
               : want_dx    ? grads_fast<T, true, true>
                            : grads_fast<T, false, true>;
    run(mutable_data_or_null<T>(dx), pp, x.data<T>(), w.get(), grad.data<T>(), data_or_null<C>(stats), s, eps);
  }
  if (want_params) merge_param_partials(params.data<T>(), pp, blocks, d);
}

// The reference recomputes the statistics in double (stats unused).
template <typename T>
void grads_reference_kernel(const Tensor& dx, const Tensor& params, const Tensor& x, const Tensor& weight,
                            const Tensor& grad, const Tensor&, double eps) {
  const RowShape s = detail::row_shape(x);
  if (dx.defined())
    dx_reference<T>(dx.data<T>(), x.data<T>(), detail::ParamData<T>(weight).get(), grad.data<T>(), s, eps);
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
template <typename T, typename C>
void layer_norm_rows_fast(T* out, C* stats, const T* x, const C* w, const C* b, RowShape s, double eps) {
  if constexpr (std::is_same_v<T, bfloat16>)
    layer_norm_bf16_fast(out, stats, x, w, b, s, eps);
  else
    layer_norm_fast<T>(out, stats, x, w, b, s, eps);
}
template <typename T, typename C>
void layer_norm_rows_reference(T* out, C* stats, const T* x, const C* w, const C* b, RowShape s, double eps) {
  layer_norm_reference<T>(out, stats, x, w, b, s, eps);
}
#define LOOM_LAYER_NORM_ROWS(T)                                                                      \
  template void layer_norm_rows_fast<T>(T*, compute_type<T>*, const T*, const compute_type<T>*,      \
                                        const compute_type<T>*, RowShape, double);                   \
  template void layer_norm_rows_reference<T>(T*, compute_type<T>*, const T*, const compute_type<T>*, \
                                             const compute_type<T>*, RowShape, double);
LOOM_LAYER_NORM_ROWS(float)
LOOM_LAYER_NORM_ROWS(double)
LOOM_LAYER_NORM_ROWS(bfloat16)
#undef LOOM_LAYER_NORM_ROWS
}  // namespace detail

LOOM_KERNELS(cpu_layer_norm) {
  kernels::for_each_type(FloatingTypesBf16{}, [](auto tag) { register_for<typename decltype(tag)::type>(); });
}

}  // namespace loom
