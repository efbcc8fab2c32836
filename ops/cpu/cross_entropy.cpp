// CPU kernels of label_smoothed_cross_entropy and its backward
// (ops/src/cross_entropy.cpp): the fast kernel and the plain reference kernel
// beside it. Each first checks the target ids and counts the live rows (one
// pass before any parallel work), then computes.
#include <cmath>
#include <vector>

#include "loom/kernel_table.h"
#include "loom/ops/kernel_signatures.h"
#include "type_lists.h"
#include "row_loops.h"
#include "row_sums.h"

namespace loom {

namespace {

using detail::RowShape;
using kernels::CrossEntropyArgs;

struct Targets {
  const int64_t* ids;
  int64_t count;  // rows that are not ignored
};

// Validates every target id (before any parallel work) and counts the live rows.
Targets check_targets(const Tensor& logits, const Tensor& target, const CrossEntropyArgs& a) {
  const int64_t V = logits.shape().back();
  const int64_t* ids = target.data<int64_t>();
  int64_t count = 0;
  for (int64_t i = 0; i < target.numel(); ++i) {
    if (ids[i] == a.ignore_index) continue;
    LOOM_CHECK(ids[i] >= 0 && ids[i] < V,
               "{}: target id {} (at flat position {}) is out of range for V = {} classes: ids must be in [0, {}) "
               "or equal ignore_index ({})",
               a.op, ids[i], i, V, V, a.ignore_index);
    ++count;
  }
  return {ids, count};
}

// Fast: per row, max and sum(x) in one pass, sum(exp) in a second; row losses
// land in `losses` and are summed in row order (the same for any thread count).
template <typename T>
double loss_fast(const T* x, const Targets& t, int64_t ignore_index, RowShape s, double eps) {
  const int64_t n = s.size;
  std::vector<double> losses(s.rows, 0.0);
  detail::parallel_rows(s.rows, n, [&](int64_t r) {
    if (t.ids[r] == ignore_index) return;
    const T* xr = x + r * n;
    T mx = detail::kNegInf<T>;
#pragma omp simd reduction(max : mx)
    for (int64_t j = 0; j < n; ++j) mx = xr[j] > mx ? xr[j] : mx;
    detail::prefetch_next_row(xr, r, s);
    const double total_x = detail::blocked_row_sum<T>(n, [&](int64_t j) { return xr[j]; });
    const double total_exp = detail::row_sum_exp(xr, n, mx);
    const double log_total = std::log(total_exp);
    const double nll = (mx - xr[t.ids[r]]) + log_total;                         // -log p_target
    const double smooth = (mx - total_x / static_cast<double>(n)) + log_total;  // mean_v -log p_v
    losses[r] = (1.0 - eps) * nll + eps * smooth;
  });
  double total = 0;
  for (double l : losses) total += l;
  return total;
}

// Reference: log-probabilities element by element, then the smoothed target's dot product.
template <typename T>
double loss_reference(const T* x, const Targets& t, int64_t ignore_index, RowShape s, double eps) {
  const int64_t n = s.size;
  double total = 0;
  for (int64_t r = 0; r < s.rows; ++r) {
    if (t.ids[r] == ignore_index) continue;
    double mx = x[r * n];
    for (int64_t j = 1; j < n; ++j) mx = std::max<double>(mx, x[r * n + j]);
    double sum_exp = 0;
    for (int64_t j = 0; j < n; ++j) sum_exp += std::exp(x[r * n + j] - mx);
    double lse = std::log(sum_exp);
    for (int64_t j = 0; j < n; ++j) {
      double log_p = (x[r * n + j] - mx) - lse;
      double target_weight = eps / static_cast<double>(n) + (j == t.ids[r] ? 1.0 - eps : 0.0);
      total -= target_weight * log_p;
    }
  }
  return total;
}

// dx row = scale * (softmax - smoothed target), scale = g / count.
template <typename T>
void backward_fast(T* out, const T* x, const Targets& t, int64_t ignore_index, RowShape s, double eps, T scale) {
  const int64_t n = s.size;
  const T spread = static_cast<T>(eps / static_cast<double>(n));
  detail::parallel_rows(s.rows, n, [&](int64_t r) {
    T* o = out + r * n;
    if (t.ids[r] == ignore_index) {
      for (int64_t j = 0; j < n; ++j) o[j] = T(0);
      return;
    }
    const T* xr = x + r * n;
    T mx = detail::kNegInf<T>;
#pragma omp simd reduction(max : mx)
    for (int64_t j = 0; j < n; ++j) mx = xr[j] > mx ? xr[j] : mx;
    detail::prefetch_next_row(xr, r, s);
    const double total = detail::row_sum_exp(xr, n, mx, o);
    const T inv = static_cast<T>(1.0 / total);
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) o[j] = scale * (o[j] * inv - spread);
    o[t.ids[r]] -= scale * static_cast<T>(1.0 - eps);
  });
}

template <typename T>
void backward_reference(T* out, const T* x, const Targets& t, int64_t ignore_index, RowShape s, double eps, T scale) {
  const int64_t n = s.size;
  for (int64_t r = 0; r < s.rows; ++r) {
    double mx = x[r * n];
    for (int64_t j = 1; j < n; ++j) mx = std::max<double>(mx, x[r * n + j]);
    double sum_exp = 0;
    for (int64_t j = 0; j < n; ++j) sum_exp += std::exp(x[r * n + j] - mx);
    for (int64_t j = 0; j < n; ++j) {
      if (t.ids[r] == ignore_index) {
        out[r * n + j] = T(0);
        continue;
      }
      double p = std::exp(x[r * n + j] - mx) / sum_exp;
      double target_weight = eps / static_cast<double>(n) + (j == t.ids[r] ? 1.0 - eps : 0.0);
      out[r * n + j] = static_cast<T>(scale * (p - target_weight));
    }
  }
}

// ---- the kernels in the table: targets checked and counted, then the row loops ----

template <typename T, double (*Loss)(const T*, const Targets&, int64_t, RowShape, double)>
void loss_kernel(const Tensor& loss, const Tensor& logits, const Tensor& target, const CrossEntropyArgs& a) {
  Targets t = check_targets(logits, target, a);
  double total = Loss(logits.data<T>(), t, a.ignore_index, detail::row_shape(logits), a.smoothing);
  *loss.data<T>() = t.count == 0 ? T(0) : static_cast<T>(total / static_cast<double>(t.count));
}

template <typename T, void (*Backward)(T*, const T*, const Targets&, int64_t, RowShape, double, T)>
void backward_kernel(const Tensor& out, const Tensor& logits, const Tensor& target, const Tensor& grad,
                     const CrossEntropyArgs& a) {
  Targets t = check_targets(logits, target, a);
  T scale = t.count == 0 ? T(0) : static_cast<T>(static_cast<double>(*grad.data<T>()) / static_cast<double>(t.count));
  Backward(out.data<T>(), logits.data<T>(), t, a.ignore_index, detail::row_shape(logits), a.smoothing, scale);
}

template <typename T>
void register_for() {
  register_kernel<kernels::CrossEntropyKernel>("label_smoothed_cross_entropy", DeviceType::cpu, dtype_of<T>(),
                                               loss_kernel<T, loss_fast<T>>, loss_kernel<T, loss_reference<T>>);
  register_kernel<kernels::CrossEntropyBackwardKernel>("label_smoothed_cross_entropy_backward", DeviceType::cpu,
                                                       dtype_of<T>(), backward_kernel<T, backward_fast<T>>,
                                                       backward_kernel<T, backward_reference<T>>);
}

// bfloat16 logits: chunks of rows widened into float32 scratch and run by float32's
// loops; the loss (float32) sums the chunks' totals in chunk order, the gradient is
// rounded once.
template <bool Fast>
void loss_bf16_kernel(const Tensor& loss, const Tensor& logits, const Tensor& target, const CrossEntropyArgs& a) {
  const Targets t = check_targets(logits, target, a);
  const RowShape s = detail::row_shape(logits);
  const bfloat16* x = logits.data<bfloat16>();
  std::vector<double> totals(static_cast<size_t>(detail::row_chunk_count(s)), 0.0);
  detail::for_each_row_chunk(s, [&](int64_t c, int64_t first, int64_t count) {
    float* xs = detail::row_scratch(count * s.size);
    detail::widen(x + first * s.size, count * s.size, xs);
    totals[c] = (Fast ? loss_fast<float> : loss_reference<float>)(xs, Targets{t.ids + first, t.count}, a.ignore_index,
                                                                  RowShape{count, s.size}, a.smoothing);
  });
  double total = 0;
  for (double chunk_total : totals) total += chunk_total;
  *loss.data<float>() = t.count == 0 ? 0.0f : static_cast<float>(total / static_cast<double>(t.count));
}

template <bool Fast>
void backward_bf16_kernel(const Tensor& out, const Tensor& logits, const Tensor& target, const Tensor& grad,
                          const CrossEntropyArgs& a) {
  const Targets t = check_targets(logits, target, a);
  const float scale =
      t.count == 0 ? 0.0f : static_cast<float>(static_cast<double>(*grad.data<float>()) / static_cast<double>(t.count));
  const RowShape s = detail::row_shape(logits);
  const bfloat16* x = logits.data<bfloat16>();
  bfloat16* o = out.data<bfloat16>();
  detail::for_each_row_chunk(s, [&](int64_t, int64_t first, int64_t count) {
    float* xs = detail::row_scratch(2 * count * s.size);
    float* os = xs + count * s.size;
    detail::widen(x + first * s.size, count * s.size, xs);
    (Fast ? backward_fast<float> : backward_reference<float>)(os, xs, Targets{t.ids + first, t.count}, a.ignore_index,
                                                              RowShape{count, s.size}, a.smoothing, scale);
    detail::narrow(os, count * s.size, o + first * s.size);
  });
}

}  // namespace

LOOM_KERNELS(cpu_cross_entropy) {
  kernels::for_each_type(FloatingTypes{}, [](auto tag) { register_for<typename decltype(tag)::type>(); });
  register_kernel<kernels::CrossEntropyKernel>("label_smoothed_cross_entropy", DeviceType::cpu, DType::bf16,
                                               loss_bf16_kernel<true>, loss_bf16_kernel<false>);
  register_kernel<kernels::CrossEntropyBackwardKernel>("label_smoothed_cross_entropy_backward", DeviceType::cpu,
                                                       DType::bf16, backward_bf16_kernel<true>,
                                                       backward_bf16_kernel<false>);
}

}  // namespace loom
