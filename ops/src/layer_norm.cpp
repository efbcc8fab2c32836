// layer_norm(x, w, b, eps) over the last dim (D entries), per row:
//   mu = mean(x),  var = mean((x - mu)^2),  r = 1/sqrt(var + eps),  xh = (x - mu) * r
//   y = xh * w + b                       (w, b of shape [D]; either may be absent)
// Backward, with a = g * w and P(u) = u - mean(u) - xh * mean(u * xh):
//   dx = layer_norm_backward(x, w, g) = r * P(a)
//   dw = sum over rows of g * xh,  db = sum over rows of g   (written with ops)
// layer_norm_backward is a primitive (one fused kernel); its derivatives, for an
// upstream v (the Jacobian of xh is r * P, and dr = -r^2 * mean(xh * dx)):
//   d/dg = w * r * P(v)            d/dw = sum over rows of g * r * P(v)
//   d/dx = -r^2 * (mean(v * P(a)) * xh + mean(a * xh) * P(v) + mean(v * xh) * P(a))
// written with ops, so they are differentiable again.
#include "rows.h"

namespace loom {

namespace {

using detail::RowShape;

template <typename T>
struct RowStats {
  T mean, rstd;
};

// Two passes (mean, then the centered sum of squares): stable for large offsets.
template <typename T>
RowStats<T> row_stats(const T* xr, int64_t n, double eps) {
  double total = 0;
#pragma omp simd reduction(+ : total)
  for (int64_t j = 0; j < n; ++j) total += xr[j];
  const T mu = static_cast<T>(total / static_cast<double>(n));
  double squares = 0;
#pragma omp simd reduction(+ : squares)
  for (int64_t j = 0; j < n; ++j) squares += (xr[j] - mu) * (xr[j] - mu);
  return {mu, static_cast<T>(1.0 / std::sqrt(squares / static_cast<double>(n) + eps))};
}

template <typename T>
void layer_norm_fast(T* out, const T* x, const T* w, const T* b, RowShape s, double eps) {
  const int64_t n = s.size;
  detail::parallel_rows(s.rows, n, [&](int64_t r) {
    const T* xr = x + r * n;
    T* o = out + r * n;
    RowStats<T> st = row_stats(xr, n, eps);
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
    double mean = 0;
    for (int64_t j = 0; j < n; ++j) mean += xr[j];
    mean /= static_cast<double>(n);
    double var = 0;
    for (int64_t j = 0; j < n; ++j) var += (xr[j] - mean) * (xr[j] - mean);
    var /= static_cast<double>(n);
    double rstd = 1.0 / std::sqrt(var + eps);
    for (int64_t j = 0; j < n; ++j) {
      double y = (xr[j] - mean) * rstd;
      if (w) y *= w[j];
      if (b) y += b[j];
      out[r * n + j] = static_cast<T>(y);
    }
  }
}

// dx = r * (a - mean(a) - xh * mean(a * xh)), a = g * w: stats, two sums, output.
template <typename T>
void layer_norm_backward_fast(T* out, const T* x, const T* w, const T* g, RowShape s, double eps) {
  const int64_t n = s.size;
  detail::parallel_rows(s.rows, n, [&](int64_t r) {
    const T* xr = x + r * n;
    const T* gr = g + r * n;
    T* o = out + r * n;
    RowStats<T> st = row_stats(xr, n, eps);
    double sum_a = 0, sum_axh = 0;
#pragma omp simd reduction(+ : sum_a, sum_axh)
    for (int64_t j = 0; j < n; ++j) {
      T a = w ? gr[j] * w[j] : gr[j];
      sum_a += a;
      sum_axh += a * ((xr[j] - st.mean) * st.rstd);
    }
    const T mean_a = static_cast<T>(sum_a / static_cast<double>(n));
    const T mean_axh = static_cast<T>(sum_axh / static_cast<double>(n));
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) {
      T a = w ? gr[j] * w[j] : gr[j];
      T xh = (xr[j] - st.mean) * st.rstd;
      o[j] = st.rstd * (a - mean_a - xh * mean_axh);
    }
  });
}

template <typename T>
void layer_norm_backward_reference(T* out, const T* x, const T* w, const T* g, RowShape s, double eps) {
  const int64_t n = s.size;
  std::vector<double> xh(n), a(n);
  for (int64_t r = 0; r < s.rows; ++r) {
    double mean = 0, var = 0;
    for (int64_t j = 0; j < n; ++j) mean += x[r * n + j];
    mean /= static_cast<double>(n);
    for (int64_t j = 0; j < n; ++j) var += (x[r * n + j] - mean) * (x[r * n + j] - mean);
    var /= static_cast<double>(n);
    double rstd = 1.0 / std::sqrt(var + eps);
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

void check_args(std::string_view op, const Tensor& x, const Tensor& w, const Tensor& b) {
  detail::require_cpu(op, x);
  LOOM_CHECK(is_floating(x.dtype()), "{}: expected float32 or float64, got {}", op, dtype_name(x.dtype()));
  LOOM_CHECK(x.dim() >= 1, "{}: expected at least 1 dim, got a 0-d tensor", op);
  for (const Tensor* p : {&w, &b}) {
    if (!p->defined()) continue;
    detail::check_same_kind(op, x, *p);
    LOOM_CHECK(p->dim() == 1 && p->shape()[0] == x.shape().back(),
               "{}: weight and bias must have shape [{}] (the input's last dim), got {}", op, x.shape().back(),
               p->shape());
  }
}

template <typename T>
const T* data_or_null(const Tensor& t) {
  return t.defined() ? t.data<T>() : nullptr;
}

// xh and r of each row, written with ops (for the differentiable double backward and the composition).
struct Normalized {
  Tensor xh, r;
};
Normalized normalize_with_ops(const Tensor& x, double eps) {
  Tensor xc = sub(x, mean(x, {-1}, true));
  Tensor var = mean(mul(xc, xc), {-1}, true);
  Tensor r = pow(add(var, scalar_tensor(eps, {x.dtype(), x.device()})), -0.5);
  return {mul(xc, r), r};
}

// P(u) = u - mean(u) - xh * mean(u * xh): the projection in layer norm's Jacobian.
Tensor project(const Tensor& u, const Tensor& xh) {
  return sub(sub(u, mean(u, {-1}, true)), mul(xh, mean(mul(u, xh), {-1}, true)));
}

}  // namespace

Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps, Where where) {
  CallSite site(where);
  check_args("layer_norm", x, weight, bias);
  Tensor xd = detail::dense(x), wd = detail::dense(weight), bd = detail::dense(bias);
  Tensor out = Tensor::empty(x.shape(), {x.dtype(), x.device()});
  dispatch_floating(x.dtype(), "layer_norm", [&](auto tag) {
    using T = typename decltype(tag)::type;
    auto run = kernel_mode() == KernelMode::reference ? layer_norm_reference<T> : layer_norm_fast<T>;
    run(out.data<T>(), xd.data<T>(), data_or_null<T>(wd), data_or_null<T>(bd), detail::row_shape(x), eps);
  });
  return record("layer_norm", {x, weight, bias}, out,
                [x, weight, eps](BackwardContext& c, const Tensor& g) -> detail::Grads {
                  Tensor dx, dw, db;
                  if (c.needs(0)) dx = layer_norm_backward(x, weight, g, eps);
                  // xh is layer_norm without affine: the fused forward again, differentiable.
                  if (c.needs(1)) dw = sum_to(mul(g, layer_norm(x, {}, {}, eps)), c.input_shape(1));
                  if (c.needs(2)) db = sum_to(g, c.input_shape(2));
                  return {dx, dw, db};
                });
}

Tensor layer_norm_backward(const Tensor& x, const Tensor& weight, const Tensor& grad, double eps, Where where) {
  CallSite site(where);
  check_args("layer_norm_backward", x, weight, {});
  detail::check_same_kind("layer_norm_backward", x, grad);
  LOOM_CHECK(x.shape() == grad.shape(), "layer_norm_backward: x has shape {} but grad has shape {}", x.shape(),
             grad.shape());
  Tensor xd = detail::dense(x), wd = detail::dense(weight), gd = detail::dense(grad);
  Tensor out = Tensor::empty(x.shape(), {x.dtype(), x.device()});
  dispatch_floating(x.dtype(), "layer_norm_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    auto run = kernel_mode() == KernelMode::reference ? layer_norm_backward_reference<T> : layer_norm_backward_fast<T>;
    run(out.data<T>(), xd.data<T>(), data_or_null<T>(wd), gd.data<T>(), detail::row_shape(x), eps);
  });
  return record("layer_norm_backward", {x, weight, grad}, out,
                [x, weight, grad, eps](BackwardContext& c, const Tensor& v) -> detail::Grads {
                  Tensor dx, dw, dg;
                  // r * P(v): the same fused kernel without weight.
                  Tensor rpv = (c.needs(1) || c.needs(2)) ? layer_norm_backward(x, {}, v, eps) : Tensor();
                  if (c.needs(0)) {
                    Normalized n = normalize_with_ops(x, eps);
                    Tensor a = weight.defined() ? mul(grad, weight) : grad;
                    Tensor pa = project(a, n.xh), pv = project(v, n.xh);
                    Tensor terms = add(add(mul(mean(mul(v, pa), {-1}, true), n.xh),
                                           mul(mean(mul(a, n.xh), {-1}, true), pv)),
                                       mul(mean(mul(v, n.xh), {-1}, true), pa));
                    dx = neg(mul(mul(n.r, n.r), terms));
                  }
                  if (c.needs(1)) dw = sum_to(mul(grad, rpv), c.input_shape(1));
                  if (c.needs(2)) dg = weight.defined() ? mul(rpv, weight) : rpv;
                  return {dx, dw, dg};
                });
}

namespace {
Tensor layer_norm_composed(const Tensor& x, const Tensor& w, const Tensor& b, double eps) {
  Tensor y = normalize_with_ops(x, eps).xh;
  if (w.defined()) y = mul(y, w);
  if (b.defined()) y = add(y, b);
  return y;
}
Tensor layer_norm_backward_composed(const Tensor& x, const Tensor& w, const Tensor& g, double eps) {
  Normalized n = normalize_with_ops(x, eps);
  return mul(n.r, project(w.defined() ? mul(g, w) : g, n.xh));
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
                {{{{3, 4}}, {{4}}, {{4}}}, [](const OpArgs& x) { return layer_norm(x[0], x[1], x[2], 0.1); },
                 "eps=0.1", [](const OpArgs& x) { return layer_norm_composed(x[0], x[1], x[2], 0.1); }}},
    .composed = [](const OpArgs& x) { return layer_norm_composed(x[0], x[1], x[2], 1e-5); },
};

LOOM_OP(layer_norm_backward){
    .name = "layer_norm_backward",
    .call = [](const OpArgs& x) { return layer_norm_backward(x[0], x[1], x[2]); },
    .samples = {{{{{4, 6}}, {{6}}, {{4, 6}}}},
                {{{{2, 3, 5}}, {{5}}, {{2, 3, 5}}}},
                {{{{3, 5}}, {{3, 5}}}, [](const OpArgs& x) { return layer_norm_backward(x[0], {}, x[1]); },
                 "no weight", [](const OpArgs& x) { return layer_norm_backward_composed(x[0], {}, x[1], 1e-5); }}},
    .composed = [](const OpArgs& x) { return layer_norm_backward_composed(x[0], x[1], x[2], 1e-5); },
};

}  // namespace loom
