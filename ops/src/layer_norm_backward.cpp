// The backward of layer_norm (layer_norm.cpp), per row of D entries, with
//   xh = (x - mean(x)) * r,  r = 1/sqrt(var(x) + eps),  a = g * w,
//   P(u) = u - mean(u) - xh * mean(u * xh)   (the projection in xh's Jacobian r * P):
//   dx = layer_norm_backward(x, w, g) = r * P(a)
//   [dw; db] = layer_norm_param_grads(x, g) = [sum over rows of g * xh; sum over rows of g]   ([2, D])
// Both are primitives computed by one fused sweep over (x, g) when both are needed
// (detail::layer_norm_grads), each recorded as its own node. Their derivatives,
// written with ops so they are differentiable again:
// layer_norm_backward, for an upstream v (dr = -r^2 * mean(xh * dx)):
//   d/dg = w * r * P(v)            d/dw = sum over rows of g * r * P(v)
//   d/dx = -r^2 * (mean(v * P(a)) * xh + mean(a * xh) * P(v) + mean(v * xh) * P(a))
// layer_norm_param_grads, for an upstream V = [vw; vb] (P is symmetric):
//   d/dx = r * P(g * vw) = layer_norm_backward(x, vw, g)
//   d/dg = xh * vw + vb  = layer_norm(x, vw, vb)
// Determinism: dx is computed row by row (one thread per row); dw and db sum fixed
// blocks of kParamRows rows into per-block partials, merged in block order in double,
// so the bits never depend on the thread count.
#include <algorithm>

#include "layer_norm.h"

namespace loom {

namespace {

using detail::RowShape;
using detail::RowStats;
using detail::row_stats;
using kernels::span_sum;

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
    const auto [mean, rstd] = detail::reference_row_stats(x + r * n, n, eps);
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
    const auto [mean, rstd] = detail::reference_row_stats(x + r * n, n, eps);
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

void check_grad(std::string_view op, const Tensor& x, const Tensor& grad) {
  detail::check_same_kind(op, x, grad);
  LOOM_CHECK(x.shape() == grad.shape(), "{}: x has shape {} but grad has shape {}", op, x.shape(), grad.shape());
}

// The node of dx = layer_norm_backward(x, weight, grad): its derivatives (top of the file).
BackwardFn dx_backward(const Tensor& x, const Tensor& weight, const Tensor& grad, double eps) {
  return [x, weight, grad, eps](BackwardContext& c, const Tensor& v) -> detail::Grads {
    Tensor dx, dw, dg;
    // r * P(v): the same fused kernel without weight.
    Tensor rpv = (c.needs(1) || c.needs(2)) ? layer_norm_backward(x, {}, v, eps) : Tensor();
    if (c.needs(0)) {
      detail::Normalized n = detail::normalize_with_ops(x, eps);
      Tensor a = weight.defined() ? mul(grad, weight) : grad;
      Tensor pa = detail::project(a, n.xh), pv = detail::project(v, n.xh);
      Tensor terms = add(add(mul(mean(mul(v, pa), {-1}, true), n.xh), mul(mean(mul(a, n.xh), {-1}, true), pv)),
                         mul(mean(mul(v, n.xh), {-1}, true), pa));
      dx = neg(mul(mul(n.r, n.r), terms));
    }
    if (c.needs(1)) dw = sum_to(mul(grad, rpv), c.input_shape(1));
    if (c.needs(2)) dg = weight.defined() ? mul(rpv, weight) : rpv;
    return {dx, dw, dg};
  };
}

// The node of [dw; db] = layer_norm_param_grads(x, grad).
BackwardFn params_backward(const Tensor& x, const Tensor& grad, double eps) {
  return [x, grad, eps](BackwardContext& c, const Tensor& v) -> detail::Grads {
    Tensor vw = select(v, 0, 0), vb = select(v, 0, 1);
    Tensor dx = c.needs(0) ? layer_norm_backward(x, vw, grad, eps) : Tensor();
    Tensor dg = c.needs(1) ? layer_norm(x, vw, vb, eps) : Tensor();
    return {dx, dg};
  };
}

}  // namespace

namespace detail {
LayerNormGrads layer_norm_grads(const Tensor& x, const Tensor& weight, const Tensor& grad, double eps, bool want_dx,
                                bool want_params, const Tensor& stats) {
  LayerNormGrads out;
  if (!want_dx && !want_params) return out;
  Tensor xd = dense(x), wd = dense(weight), gd = dense(grad);
  const int64_t d = x.shape().back();
  const RowShape s = row_shape(x);
  if (want_dx) out.dx = Tensor::empty(x.shape(), {x.dtype(), x.device()});
  if (want_params) out.params = Tensor::empty({2, d}, {x.dtype(), x.device()});
  dispatch_floating(x.dtype(), "layer_norm_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* dx = want_dx ? out.dx.data<T>() : nullptr;
    T* params = want_params ? out.params.data<T>() : nullptr;
    if (kernel_mode() == KernelMode::reference) {
      if (want_dx) dx_reference<T>(dx, xd.data<T>(), data_or_null<T>(wd), gd.data<T>(), s, eps);
      if (want_params) param_grads_reference<T>(params, xd.data<T>(), gd.data<T>(), s, eps);
      return;
    }
    const int64_t blocks = param_blocks(s.rows);
    Tensor partial = want_params ? Tensor::empty({blocks, 2, d}, {x.dtype(), x.device()}) : Tensor();
    T* pp = want_params ? partial.data<T>() : nullptr;
    auto run = !want_params ? grads_fast<T, true, false> : want_dx ? grads_fast<T, true, true> : grads_fast<T, false, true>;
    run(dx, pp, xd.data<T>(), data_or_null<T>(wd), gd.data<T>(), data_or_null<T>(stats), s, eps);
    if (want_params) merge_param_partials(params, pp, blocks, d);
  });
  if (want_dx) out.dx = record("layer_norm_backward", {x, weight, grad}, out.dx, dx_backward(x, weight, grad, eps));
  if (want_params) out.params = record("layer_norm_param_grads", {x, grad}, out.params, params_backward(x, grad, eps));
  return out;
}
}  // namespace detail

Tensor layer_norm_backward(const Tensor& x, const Tensor& weight, const Tensor& grad, double eps, Where where) {
  CallSite site(where);
  detail::check_layer_norm_args("layer_norm_backward", x, weight, {});
  check_grad("layer_norm_backward", x, grad);
  return detail::layer_norm_grads(x, weight, grad, eps, true, false).dx;
}

Tensor layer_norm_param_grads(const Tensor& x, const Tensor& grad, double eps, Where where) {
  CallSite site(where);
  detail::check_layer_norm_args("layer_norm_param_grads", x, {}, {});
  check_grad("layer_norm_param_grads", x, grad);
  return detail::layer_norm_grads(x, {}, grad, eps, false, true).params;
}

namespace {
Tensor layer_norm_backward_composed(const Tensor& x, const Tensor& w, const Tensor& g, double eps) {
  detail::Normalized n = detail::normalize_with_ops(x, eps);
  return mul(n.r, detail::project(w.defined() ? mul(g, w) : g, n.xh));
}
Tensor layer_norm_param_grads_composed(const Tensor& x, const Tensor& g, double eps) {
  Tensor xh = detail::normalize_with_ops(x, eps).xh;
  Shape d = {x.shape().back()};
  return stack({sum_to(mul(g, xh), d), sum_to(g, d)});
}
}  // namespace

LOOM_OP(layer_norm_backward){
    .name = "layer_norm_backward",
    .call = [](const OpArgs& x) { return layer_norm_backward(x[0], x[1], x[2]); },
    .samples = {{{{{4, 6}}, {{6}}, {{4, 6}}}},
                {{{{2, 3, 5}}, {{5}}, {{2, 3, 5}}}},
                {{{{3, 70}}, {{70}}, {{3, 70}}}, {}, "D=70 (vector lanes)"},
                {{{{3, 5}}, {{3, 5}}}, [](const OpArgs& x) { return layer_norm_backward(x[0], {}, x[1]); },
                 "no weight", [](const OpArgs& x) { return layer_norm_backward_composed(x[0], {}, x[1], 1e-5); }}},
    .composed = [](const OpArgs& x) { return layer_norm_backward_composed(x[0], x[1], x[2], 1e-5); },
};

LOOM_OP(layer_norm_param_grads){
    .name = "layer_norm_param_grads",
    .call = [](const OpArgs& x) { return layer_norm_param_grads(x[0], x[1]); },
    .samples = {{{{{4, 6}}, {{4, 6}}}},
                {{{{2, 3, 5}}, {{2, 3, 5}}}},
                // 40 rows of 70: two row blocks of the partial sums, the vector lanes and the tail
                {{{{40, 70}}, {{40, 70}}}, {}, "[40,70] (row blocks, vector lanes)"},
                {{{{3, 4}}, {{3, 4}}}, [](const OpArgs& x) { return layer_norm_param_grads(x[0], x[1], 0.1); },
                 "eps=0.1", [](const OpArgs& x) { return layer_norm_param_grads_composed(x[0], x[1], 0.1); }}},
    .composed = [](const OpArgs& x) { return layer_norm_param_grads_composed(x[0], x[1], 1e-5); },
};

}  // namespace loom
