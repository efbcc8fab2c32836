// layer_norm(x, w, b, eps) over the last dim (D entries), per row:
//   mu = mean(x),  var = mean((x - mu)^2),  r = 1/sqrt(var + eps),  xh = (x - mu) * r
//   y = xh * w + b                       (w, b of shape [D]; either may be absent)
// Backward (layer_norm_backward.cpp, one fused sweep over x and g), with a = g * w
// and P(u) = u - mean(u) - xh * mean(u * xh):
//   dx = layer_norm_backward(x, w, g) = r * P(a)
//   [dw; db] = layer_norm_param_grads(x, g) = [sum over rows of g * xh; sum over rows of g]
#include "layer_norm.h"

namespace loom {

namespace {

using detail::RowShape;
using detail::RowStats;
using detail::row_stats;

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

template <typename T>
void layer_norm_reference(T* out, const T* x, const T* w, const T* b, RowShape s, double eps) {
  const int64_t n = s.size;
  for (int64_t r = 0; r < s.rows; ++r) {
    const T* xr = x + r * n;
    const auto [mean, rstd] = detail::reference_row_stats(xr, n, eps);
    for (int64_t j = 0; j < n; ++j) {
      double y = (xr[j] - mean) * rstd;
      if (w) y *= w[j];
      if (b) y += b[j];
      out[r * n + j] = static_cast<T>(y);
    }
  }
}

}  // namespace

Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps, Where where) {
  CallSite site(where);
  detail::check_layer_norm_args("layer_norm", x, weight, bias);
  Tensor xd = detail::dense(x), wd = detail::dense(weight), bd = detail::dense(bias);
  Tensor out = Tensor::empty(x.shape(), {x.dtype(), x.device()});
  // The fast kernel's per-row (mean, rstd), saved so the backward need not recompute them.
  Tensor stats;
  const detail::RowShape shape = detail::row_shape(x);
  dispatch_floating(x.dtype(), "layer_norm", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* w = detail::data_or_null<T>(wd);
    const T* b = detail::data_or_null<T>(bd);
    if (kernel_mode() == KernelMode::reference) {
      layer_norm_reference<T>(out.data<T>(), xd.data<T>(), w, b, shape, eps);
    } else {
      stats = Tensor::empty({shape.rows, 2}, {x.dtype(), x.device()});
      layer_norm_fast<T>(out.data<T>(), stats.data<T>(), xd.data<T>(), w, b, shape, eps);
    }
  });
  return record("layer_norm", {x, weight, bias}, out,
                [x, weight, eps, stats](BackwardContext& c, const Tensor& g) -> detail::Grads {
                  const bool want_params = c.needs(1) || c.needs(2);
                  detail::LayerNormGrads d =
                      detail::layer_norm_grads(x, weight, g, eps, c.needs(0), want_params, stats);
                  Tensor dw = c.needs(1) ? select(d.params, 0, 0) : Tensor();
                  Tensor db = c.needs(2) ? select(d.params, 0, 1) : Tensor();
                  return {d.dx, dw, db};
                });
}

namespace {
Tensor layer_norm_composed(const Tensor& x, const Tensor& w, const Tensor& b, double eps) {
  Tensor y = detail::normalize_with_ops(x, eps).xh;
  if (w.defined()) y = mul(y, w);
  if (b.defined()) y = add(y, b);
  return y;
}
}  // namespace

LOOM_OP(layer_norm){
    .name = "layer_norm",
    .call = [](const OpArgs& x) { return layer_norm(x[0], x[1], x[2]); },
    .samples = {{{{{4, 6}}, {{6}}, {{6}}}},
                {{{{2, 3, 5}}, {{5}}, {{5}}}},
                {{{{3, 5}}, {{5}}}, [](const OpArgs& x) { return layer_norm(x[0], x[1]); }, "weight only",
                 [](const OpArgs& x) { return layer_norm_composed(x[0], x[1], {}, 1e-5); }},
                {{{{3, 5}}}, [](const OpArgs& x) { return layer_norm(x[0]); }, "no affine",
                 [](const OpArgs& x) { return layer_norm_composed(x[0], {}, {}, 1e-5); }},
                // D = 70: the float32 fast kernels' vector lanes, blocks and scalar tail
                {{{{3, 70}}, {{70}}, {{70}}}, {}, "D=70 (vector lanes)"},
                {{{{3, 4}}, {{4}}, {{4}}}, [](const OpArgs& x) { return layer_norm(x[0], x[1], x[2], 0.1); },
                 "eps=0.1", [](const OpArgs& x) { return layer_norm_composed(x[0], x[1], x[2], 0.1); }}},
    .composed = [](const OpArgs& x) { return layer_norm_composed(x[0], x[1], x[2], 1e-5); },
};

}  // namespace loom
