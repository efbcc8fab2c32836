// log_softmax(x, dim, mask) over `dim`, with z = x + mask (z = -inf where a bool mask is true):
//   y_i = (z_i - max z) - log(sum_j exp(z_j - max z))
//   dx = log_softmax_backward(y, g) = valid * (g - exp(y) * sum(valid * g))
// where valid = (y != -inf): a masked entry's output is the constant -inf, so it
// passes no gradient (and a fully masked row, all -inf, has gradient 0, not NaN).
// log_softmax_backward(y, g) is a primitive; its derivatives, written with ops:
//   d/dg = valid * (v - sum(v * exp(y)))     d/dy = -v * exp(y) * sum(valid * g)
// Any dim: the kernel runs over the last dim; another dim is transposed there and back.
#include "rows.h"

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
      const T log_total =
          static_cast<T>(std::log(detail::row_sum_exp(yr, n, mx)));
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
    const T t = static_cast<T>(
        detail::blocked_row_sum<T>(n, [&](int64_t j) { return yr[j] == kNegInf<T> ? T(0) : gr[j]; }));
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

// 1 where y is a real log-probability, 0 where it is -inf (masked); undefined
// when nothing is masked, so the common case skips the multiply.
Tensor valid_mask(const Tensor& y) {
  Tensor yd = detail::dense(y);
  Tensor valid = Tensor::empty(y.shape(), {y.dtype(), y.device()});
  bool any_masked = false;
  dispatch_floating(y.dtype(), "log_softmax_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* py = yd.data<T>();
    T* pv = valid.data<T>();
    for (int64_t i = 0; i < y.numel(); ++i) {
      pv[i] = py[i] == kNegInf<T> ? T(0) : T(1);
      any_masked |= py[i] == kNegInf<T>;
    }
  });
  return any_masked ? valid : Tensor();
}

Tensor log_softmax_last(const Tensor& x, const Tensor& mask) {
  Tensor out = detail::masked_rows("log_softmax", x, mask, [](auto tag, auto kind, auto* y, const auto* xs, const RowMask& m,
                                                       RowShape shape) {
    using T = typename decltype(tag)::type;
    constexpr MaskKind K = decltype(kind)::value;
    if (kernel_mode() == KernelMode::reference) log_softmax_reference<T, K>(y, xs, m, shape);
    else log_softmax_fast<T, K>(y, xs, m, shape);
  });
  Shape mask_shape = mask.defined() ? mask.shape() : Shape{};
  return record("log_softmax", {x, mask}, out, [mask_shape](BackwardContext& c, const Tensor& g) -> detail::Grads {
    Tensor dx = log_softmax_backward(c.out(), g);
    return {c.needs(0) ? dx : Tensor(), c.needs(1) ? sum_to(dx, mask_shape) : Tensor()};
  }, SavedOutput::yes);
}

}  // namespace

Tensor log_softmax(const Tensor& x, int64_t dim, const Tensor& mask, Where where) {
  CallSite site(where);
  return detail::along_dim("log_softmax", x, dim, mask, log_softmax_last);
}

Tensor log_softmax_backward(const Tensor& y, const Tensor& grad, Where where) {
  CallSite site(where);
  Tensor out = detail::row_backward("log_softmax_backward", y, grad, [](auto* o, const auto* ys, const auto* gs, RowShape shape) {
    using T = std::remove_pointer_t<decltype(o)>;
    if (kernel_mode() == KernelMode::reference) log_softmax_backward_reference<T>(o, ys, gs, shape);
    else log_softmax_backward_fast<T>(o, ys, gs, shape);
  });
  return record("log_softmax_backward", {y, grad}, out,
                [y, grad](BackwardContext& c, const Tensor& v) -> detail::Grads {
                  Tensor valid;
                  {
                    NoGradGuard no_grad;
                    valid = valid_mask(y.detach());
                  }
                  auto masked = [&](const Tensor& t) { return valid.defined() ? mul(t, valid) : t; };
                  Tensor p = exp(y);
                  Tensor dy, dg;
                  if (c.needs(0)) dy = neg(mul(mul(v, p), sum(masked(grad), {-1}, true)));
                  if (c.needs(1)) dg = masked(sub(v, sum(mul(v, p), {-1}, true)));
                  return {dy, dg};
                });
}

namespace {
Tensor log_softmax_composed(const Tensor& z, int64_t dim) { return sub(z, log(sum(exp(z), {dim}, true))); }
}  // namespace

LOOM_OP(log_softmax){
    .name = "log_softmax",
    .call = [](const OpArgs& x) { return log_softmax(x[0]); },
    .samples = {unary_sample({4, 7}),
                unary_sample({2, 3, 5}),
                {{{{2, 5, 3}}}, [](const OpArgs& x) { return log_softmax(x[0], 0); }, "dim=0",
                 [](const OpArgs& x) { return log_softmax_composed(x[0], 0); }},
                {{{{3, 4, 5}}, {{4, 5}}}, [](const OpArgs& x) { return log_softmax(x[0], -1, x[1]); },
                 "additive mask [4,5]", [](const OpArgs& x) { return log_softmax_composed(add(x[0], x[1]), -1); }}},
    .composed = [](const OpArgs& x) { return log_softmax_composed(x[0], -1); },
};

// y drawn as real log-probabilities would be log_softmax(...); the formula is
// checked for any y (it is smooth in y and linear in g).
LOOM_OP(log_softmax_backward){
    .name = "log_softmax_backward",
    .call = [](const OpArgs& x) { return log_softmax_backward(x[0], x[1]); },
    .samples = {binary_sample({4, 7}, {4, 7}), binary_sample({2, 3, 5}, {2, 3, 5})},
    .composed = [](const OpArgs& x) { return sub(x[1], mul(exp(x[0]), sum(x[1], {-1}, true))); },
};

}  // namespace loom
