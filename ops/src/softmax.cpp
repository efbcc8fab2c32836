// softmax(x, dim, mask) over `dim`, with z = x + mask (z = -inf where a bool mask is true):
//   y_i = exp(z_i - max z) / sum_j exp(z_j - max z)
//   dx = softmax_backward(y, g) = y * (g - sum(g * y))      dmask (float) = dx summed to mask's shape
// softmax_backward(y, g) is a primitive of its own (one fused kernel in the
// backward pass) whose derivatives are written with ops, so double backward works:
//   d/dg = softmax_backward(y, v)          d/dy = v * (g - sum(g * y)) - g * sum(v * y)
// A fully masked row (max z = -inf) is all zeros, not NaN; its gradient is 0 (y = 0).
// Any dim: the kernel runs over the last dim; another dim is transposed there and back.
#include "rows.h"

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
      // exp and its sum in one vector loop (float32: rows.cpp, AVX-512 where the CPU has it).
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

// The primitive: softmax over the last dim.
Tensor softmax_last(const Tensor& x, const Tensor& mask) {
  Tensor out = detail::masked_rows("softmax", x, mask, [](auto tag, auto kind, auto* y, const auto* xs, const RowMask& m,
                                                       RowShape shape) {
    using T = typename decltype(tag)::type;
    constexpr MaskKind K = decltype(kind)::value;
    if (kernel_mode() == KernelMode::reference) softmax_reference<T, K>(y, xs, m, shape);
    else softmax_fast<T, K>(y, xs, m, shape);
  });
  Shape mask_shape = mask.defined() ? mask.shape() : Shape{};
  return record("softmax", {x, mask}, out, [mask_shape](BackwardContext& c, const Tensor& g) -> detail::Grads {
    Tensor dx = softmax_backward(c.out(), g);
    return {c.needs(0) ? dx : Tensor(), c.needs(1) ? sum_to(dx, mask_shape) : Tensor()};
  }, SavedOutput::yes);
}

}  // namespace

Tensor softmax(const Tensor& x, int64_t dim, const Tensor& mask, Where where) {
  CallSite site(where);
  return detail::along_dim("softmax", x, dim, mask, softmax_last);
}

Tensor softmax_backward(const Tensor& y, const Tensor& grad, Where where) {
  CallSite site(where);
  Tensor out = detail::row_backward("softmax_backward", y, grad, [](auto* o, const auto* ys, const auto* gs, RowShape shape) {
    using T = std::remove_pointer_t<decltype(o)>;
    if (kernel_mode() == KernelMode::reference) softmax_backward_reference<T>(o, ys, gs, shape);
    else softmax_backward_fast<T>(o, ys, gs, shape);
  });
  return record("softmax_backward", {y, grad}, out, [y, grad](BackwardContext& c, const Tensor& v) -> detail::Grads {
    Tensor dy;
    if (c.needs(0))
      dy = sub(mul(v, sub(grad, sum(mul(grad, y), {-1}, true))), mul(grad, sum(mul(v, y), {-1}, true)));
    return {dy, c.needs(1) ? softmax_backward(y, v) : Tensor()};
  });
}

namespace {
// The compositions the matrix checks the fused op against.
Tensor softmax_composed(const Tensor& z, int64_t dim) {
  Tensor e = exp(z);
  return div(e, sum(e, {dim}, true));
}
}  // namespace

LOOM_OP(softmax){
    .name = "softmax",
    .call = [](const OpArgs& x) { return softmax(x[0]); },
    .samples = {unary_sample({4, 7}),
                unary_sample({2, 3, 5}),
                {{{{2, 5, 3}}}, [](const OpArgs& x) { return softmax(x[0], 1); }, "dim=1",
                 [](const OpArgs& x) { return softmax_composed(x[0], 1); }},
                {{{{3, 4, 5}}, {{4, 5}}}, [](const OpArgs& x) { return softmax(x[0], -1, x[1]); },
                 "additive mask [4,5]", [](const OpArgs& x) { return softmax_composed(add(x[0], x[1]), -1); }},
                {{{{2, 5, 3}}, {{5, 1}}}, [](const OpArgs& x) { return softmax(x[0], 1, x[1]); },
                 "dim=1, additive mask [5,1]", [](const OpArgs& x) { return softmax_composed(add(x[0], x[1]), 1); }},
                {{{{2, 4, 4}}}, [](const OpArgs& x) { return softmax(x[0], -1, causal_mask(4)); },
                 "causal bool mask",
                 [](const OpArgs& x) { return softmax_composed(add(x[0], detail::causal_additive(4)), -1); }}},
    .composed = [](const OpArgs& x) { return softmax_composed(x[0], -1); },
};

LOOM_OP(softmax_backward){
    .name = "softmax_backward",
    .call = [](const OpArgs& x) { return softmax_backward(x[0], x[1]); },
    .samples = {binary_sample({4, 7}, {4, 7}), binary_sample({2, 3, 5}, {2, 3, 5})},
    .composed = [](const OpArgs& x) { return mul(x[0], sub(x[1], sum(mul(x[1], x[0]), {-1}, true))); },
};

}  // namespace loom
