// label_smoothed_cross_entropy(x, t, eps, ignore_index), x = logits [..., V], t int64 [...]:
//   lse_i  = max_i + log(sum_v exp(x_iv - max_i))         (log p_iv = x_iv - lse_i)
//   loss_i = (1 - eps) * (lse_i - x_i,t_i) + eps * (lse_i - mean_v x_iv)
//   loss   = sum of loss_i over rows with t_i != ignore_index, / count   (0 when count = 0)
// (PyTorch's cross_entropy(label_smoothing=eps): eps / V on every class, the target included.)
//   dx = label_smoothed_cross_entropy_backward(x, t, g)
//      = (softmax(x) - ((1 - eps) * onehot(t) + eps / V)) * g / count, zero rows where ignored
// The backward is a primitive (no one-hot is ever materialized); its derivatives, with
// w_i = valid_i / count (a [..., 1] constant):
//   d/dx = softmax_backward(softmax(x), v * g * w)      d/dg = sum(v * backward(x, t, 1))
// All targets ignored: loss 0 and gradient 0 (PyTorch gives NaN from 0 / 0).
#include "rows.h"

namespace loom {

namespace {

using detail::RowShape;

struct Targets {
  const int64_t* ids;
  int64_t count;  // rows that are not ignored
};

// Validates every target id (before any parallel work) and counts the live rows.
Targets check_targets(std::string_view op, const Tensor& logits, const Tensor& target, const Tensor& dense_target,
                      int64_t ignore_index) {
  const int64_t V = logits.shape().back();
  const int64_t* ids = dense_target.data<int64_t>();
  int64_t count = 0;
  for (int64_t i = 0; i < target.numel(); ++i) {
    if (ids[i] == ignore_index) continue;
    LOOM_CHECK(ids[i] >= 0 && ids[i] < V,
               "{}: target id {} (at flat position {}) is out of range for V = {} classes: ids must be in [0, {}) "
               "or equal ignore_index ({})",
               op, ids[i], i, V, V, ignore_index);
    ++count;
  }
  return {ids, count};
}

void check_args(std::string_view op, const Tensor& logits, const Tensor& target, double smoothing) {
  detail::require_cpu(op, logits);
  detail::require_cpu(op, target);
  LOOM_CHECK(is_floating(logits.dtype()), "{}: logits must be float32 or float64, got {}", op,
             dtype_name(logits.dtype()));
  LOOM_CHECK(target.dtype() == DType::i64, "{}: target must be int64 class ids, got {}", op,
             dtype_name(target.dtype()));
  LOOM_CHECK(logits.dim() >= 1 && logits.shape().back() > 0, "{}: logits need a non-empty class dim, got shape {}",
             op, logits.shape());
  Shape rows(logits.shape().begin(), logits.shape().end() - 1);
  LOOM_CHECK(target.shape() == rows, "{}: target has shape {} but logits {} need target shape {}", op, target.shape(),
             logits.shape(), rows);
  LOOM_CHECK(smoothing >= 0.0 && smoothing <= 1.0, "{}: smoothing must be in [0, 1], got {}", op, smoothing);
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
    const double nll = (mx - xr[t.ids[r]]) + log_total;                          // -log p_target
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
void backward_reference(T* out, const T* x, const Targets& t, int64_t ignore_index, RowShape s, double eps,
                        T scale) {
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

// valid_i / count as a [..., 1] constant of the logits' dtype (0 everywhere when count = 0).
Tensor row_weights(const Tensor& logits, const Targets& t, int64_t ignore_index) {
  Shape shape(logits.shape().begin(), logits.shape().end() - 1);
  shape.push_back(1);
  Tensor w = Tensor::empty(shape, {DType::f64});
  double* p = w.data<double>();
  for (int64_t i = 0; i < w.numel(); ++i) p[i] = t.ids[i] == ignore_index ? 0.0 : 1.0 / static_cast<double>(t.count);
  return to_dtype(w, logits.dtype());
}

}  // namespace

Tensor label_smoothed_cross_entropy(const Tensor& logits, const Tensor& target, double smoothing,
                                    int64_t ignore_index, Where where) {
  CallSite site(where);
  constexpr std::string_view op = "label_smoothed_cross_entropy";
  check_args(op, logits, target, smoothing);
  Tensor xd = detail::dense(logits), td = detail::dense(target);
  Targets t = check_targets(op, logits, target, td, ignore_index);
  Tensor out = Tensor::empty({}, {logits.dtype(), logits.device()});
  dispatch_floating(logits.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    auto run = kernel_mode() == KernelMode::reference ? loss_reference<T> : loss_fast<T>;
    double total = run(xd.data<T>(), t, ignore_index, detail::row_shape(logits), smoothing);
    *out.data<T>() = t.count == 0 ? T(0) : static_cast<T>(total / static_cast<double>(t.count));
  });
  return record(op, {logits, target}, out,
                [logits, target, smoothing, ignore_index](BackwardContext&, const Tensor& g) -> detail::Grads {
                  return {label_smoothed_cross_entropy_backward(logits, target, g, smoothing, ignore_index),
                          Tensor()};
                });
}

Tensor label_smoothed_cross_entropy_backward(const Tensor& logits, const Tensor& target, const Tensor& grad,
                                             double smoothing, int64_t ignore_index, Where where) {
  CallSite site(where);
  constexpr std::string_view op = "label_smoothed_cross_entropy_backward";
  check_args(op, logits, target, smoothing);
  detail::check_same_kind(op, logits, grad);
  LOOM_CHECK(grad.numel() == 1, "{}: grad must hold one value (the loss is a scalar), got shape {}", op,
             grad.shape());
  Tensor xd = detail::dense(logits), td = detail::dense(target);
  Targets t = check_targets(op, logits, target, td, ignore_index);
  Tensor out = Tensor::empty(logits.shape(), {logits.dtype(), logits.device()});
  dispatch_floating(logits.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T scale = t.count == 0 ? T(0) : static_cast<T>(grad.item<double>() / static_cast<double>(t.count));
    auto run = kernel_mode() == KernelMode::reference ? backward_reference<T> : backward_fast<T>;
    run(out.data<T>(), xd.data<T>(), t, ignore_index, detail::row_shape(logits), smoothing, scale);
  });
  return record(op, {logits, target, grad}, out,
                [logits, target, grad, smoothing, ignore_index](BackwardContext& c, const Tensor& v) -> detail::Grads {
                  Tensor dx, dg;
                  if (c.needs(0)) {
                    Tensor td = detail::dense(target);
                    Targets t{td.data<int64_t>(), 0};
                    for (int64_t i = 0; i < target.numel(); ++i) t.count += t.ids[i] != ignore_index;
                    Tensor w = row_weights(logits, t, ignore_index);
                    dx = softmax_backward(softmax(logits), mul(v, mul(reshape(grad, {}), w)));
                  }
                  if (c.needs(2)) {
                    Tensor one = scalar_tensor(1.0, {logits.dtype(), logits.device()});
                    Tensor per_unit = label_smoothed_cross_entropy_backward(logits, target, one, smoothing, ignore_index);
                    dg = reshape(sum(mul(v, per_unit)), c.input_shape(2));
                  }
                  return {dx, Tensor(), dg};
                });
}

namespace {

// The composition: log_softmax as x - log(sum(exp(x))), and the smoothed
// one-hot target built as a constant (fine for a test, never done by the op).
Tensor smoothed_targets(const Tensor& logits, const Tensor& target, double eps, int64_t ignore_index) {
  const int64_t V = logits.shape().back();
  Tensor td = detail::dense(target);
  Tensor q = zeros(logits.shape(), {DType::f64});
  double* p = q.data<double>();
  for (int64_t i = 0; i < target.numel(); ++i) {
    int64_t id = td.data<int64_t>()[i];
    if (id == ignore_index) continue;  // the row's weight is 0 anyway
    for (int64_t j = 0; j < V; ++j) p[i * V + j] = eps / static_cast<double>(V) + (j == id ? 1.0 - eps : 0.0);
  }
  return q;
}

Tensor weights_composed(const Tensor& logits, const Tensor& target, int64_t ignore_index) {
  Tensor td = detail::dense(target);
  Targets t{td.data<int64_t>(), 0};
  for (int64_t i = 0; i < target.numel(); ++i) t.count += t.ids[i] != ignore_index;
  return row_weights(logits, t, ignore_index);
}

Tensor lsce_composed(const Tensor& x, const Tensor& target, double eps, int64_t ignore_index = -100) {
  Tensor log_p = sub(x, log(sum(exp(x), {-1}, true)));
  Tensor per_row = neg(sum(mul(log_p, smoothed_targets(x, target, eps, ignore_index)), {-1}, true));
  return sum(mul(per_row, weights_composed(x, target, ignore_index)));
}

Tensor lsce_backward_composed(const Tensor& x, const Tensor& target, const Tensor& g, double eps) {
  Tensor e = exp(x);
  Tensor p = div(e, sum(e, {-1}, true));
  return mul(sub(p, smoothed_targets(x, target, eps, -100)), mul(g, weights_composed(x, target, -100)));
}

// Targets with rows 1 and 3 ignored (ids drawn by the matrix are all in range).
Tensor with_ignored(const Tensor& target) {
  Tensor t = Tensor::empty(target.shape(), {DType::i64});
  copy_(t, target);
  t.data<int64_t>()[1] = -100;
  t.data<int64_t>()[3] = -100;
  return t;
}

}  // namespace

LOOM_OP(label_smoothed_cross_entropy){
    .name = "label_smoothed_cross_entropy",
    .call = [](const OpArgs& x) { return label_smoothed_cross_entropy(x[0], x[1], 0.1); },
    .samples = {{{{{5, 7}}, {{5}, Domain::any, DType::i64, 7}}, {}, "eps=0.1"},
                {{{{2, 3, 6}}, {{2, 3}, Domain::any, DType::i64, 6}},
                 [](const OpArgs& x) { return label_smoothed_cross_entropy(x[0], x[1], 0.0); }, "eps=0 [2,3,6]",
                 [](const OpArgs& x) { return lsce_composed(x[0], x[1], 0.0); }},
                {{{{5, 4}}, {{5}, Domain::any, DType::i64, 4}},
                 [](const OpArgs& x) { return label_smoothed_cross_entropy(x[0], with_ignored(x[1]), 0.2); },
                 "eps=0.2, rows 1,3 ignored",
                 [](const OpArgs& x) { return lsce_composed(x[0], with_ignored(x[1]), 0.2); }}},
    .composed = [](const OpArgs& x) { return lsce_composed(x[0], x[1], 0.1); },
};

LOOM_OP(label_smoothed_cross_entropy_backward){
    .name = "label_smoothed_cross_entropy_backward",
    .call = [](const OpArgs& x) { return label_smoothed_cross_entropy_backward(x[0], x[1], x[2], 0.1); },
    .samples = {{{{{5, 7}}, {{5}, Domain::any, DType::i64, 7}, {{}}}, {}, "eps=0.1"}},
    .composed = [](const OpArgs& x) { return lsce_backward_composed(x[0], x[1], x[2], 0.1); },
};

}  // namespace loom
