#pragma once
// Row plumbing shared by the fused last-dim ops (softmax, log_softmax, layer
// norm, cross-entropy): inputs as dense rows, masks broadcast along rows, and
// OpenMP over rows. Each row is computed start to finish by one thread in a
// fixed order, so results are the same bits for any thread count.
#include <omp.h>

#include <limits>
#include <type_traits>

#include "elementwise.h"
#include "loom/kernels/vec_math.h"

namespace loom::detail {

// x as dense row-major memory, outside autograd: kernels read it directly.
// A copy is made only for strided or expanded views.
inline Tensor dense(const Tensor& x) {
  if (!x.defined() || x.is_contiguous()) return x;
  NoGradGuard no_grad;
  return contiguous(x.detach());
}

// [..., D] seen as rows x D (a 0-d tensor is one row of one element).
struct RowShape {
  int64_t rows = 0, size = 0;
};
inline RowShape row_shape(const Tensor& x) {
  int64_t size = x.dim() == 0 ? 1 : x.shape().back();
  return {size == 0 ? 0 : x.numel() / size, size};
}

// body(r) for every row r; static split over threads when the work is large.
template <typename Body>
void parallel_rows(int64_t rows, int64_t size, Body body) {
  const bool parallel = rows > 1 && rows * size >= kernels::kParallelGrain && !omp_in_parallel();
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t r = 0; r < rows; ++r) body(r);
}

template <typename T>
inline constexpr T kNegInf = -std::numeric_limits<T>::infinity();

// sum_j term(j) over a row: vector lanes of T within fixed 256-element blocks,
// the blocks added in double. float32 rows sum at vector speed (no conversions
// in the inner loop), and rounding is bounded by the block, not the row length
// (a 8000-wide vocabulary row). The blocks are fixed, so the bits never depend
// on threads. term may write (e.g. store the exponential it returns).
inline constexpr int64_t kSumBlock = 256;
// Always inlined: the AVX-512 twins in rows.cpp instantiate it, and only code
// inlined into a target("avx512f") function is compiled for AVX-512.
template <typename T, typename Term>
[[gnu::always_inline]] inline double blocked_row_sum(int64_t n, Term term) {
  double total = 0;
  for (int64_t begin = 0; begin < n; begin += kSumBlock) {
    const int64_t end = std::min(n, begin + kSumBlock);
    T partial = 0;
#pragma omp simd reduction(+ : partial)
    for (int64_t j = begin; j < end; ++j) partial += term(j);
    total += partial;
  }
  return total;
}

// e^x for x <= 0, a logit minus its row's max (or NaN): float32 takes the
// vector exp without its overflow clamp; float64 takes libm.
template <typename T>
inline T exp_below_max(T x) {
  if constexpr (std::is_same_v<T, float>) return kernels::exp_approx<float, /*NonPositive=*/true>(x);
  else return std::exp(x);
}

// The loop itself: sum_j exp(x_j - shift) (shift >= every x_j: the row max) as
// a blocked_row_sum; Store also writes each exp to out (which may be x).
template <bool Store, typename T>
[[gnu::always_inline]] inline double exp_sum_loop(T* out, const T* x, int64_t n, T shift) {
  return blocked_row_sum<T>(n, [&](int64_t j) {
    T e = exp_below_max(x[j] - shift);
    if constexpr (Store) out[j] = e;
    return e;
  });
}

// The float loops compiled for AVX-512 or AVX2, picked per call (rows.cpp).
double sum_exp_below_max(const float* x, int64_t n, float shift);
double store_exp_below_max(float* out, const float* x, int64_t n, float shift);

// sum_j exp(x_j - shift) over a row of n, also written to out when given (out may be x).
template <typename T>
double row_sum_exp(const T* x, int64_t n, T shift, T* out = nullptr) {
  if constexpr (std::is_same_v<T, float>)
    return out ? store_exp_below_max(out, x, n, shift) : sum_exp_below_max(x, n, shift);
  else
    return out ? exp_sum_loop<true>(out, x, n, shift) : exp_sum_loop<false, T>(nullptr, x, n, shift);
}

// Asks for the next row's cache lines while this row is computed. A long row
// (a vocabulary of 8000 floats, 32 KiB) is read from memory by its first pass
// and then worked on in cache by the exp pass; without this the memory idles
// during the arithmetic (cross-entropy's forward: 3.1 -> 1.9 ms).
template <typename T>
inline void prefetch_next_row(const T* row, int64_t r, RowShape s) {
  if (r + 1 >= s.rows) return;
  const T* next = row + s.size;
  for (int64_t j = 0; j < s.size; j += 64 / static_cast<int64_t>(sizeof(T))) __builtin_prefetch(next + j, 0, 2);
}

// ---- masks broadcast along rows ----
enum class MaskKind { none, additive, boolean };

// A mask read in place (no copy) as broadcast to x's shape: row r of it starts
// at element row_base(r) and steps by `step` along the row (0 when broadcast).
struct RowMask {
  MaskKind kind = MaskKind::none;
  const void* data = nullptr;
  std::vector<int64_t> row_bases;  // element offset of each row's start
  int64_t step = 0;

  int64_t row_base(int64_t r) const { return row_bases[r]; }
  template <typename T>
  const T* row(int64_t r) const { return static_cast<const T*>(data) + row_base(r); }
};

// Checks `mask` against x (broadcastable; bool, or x's float dtype) and views it.
inline RowMask row_mask(std::string_view op, const Tensor& mask, const Tensor& x) {
  RowMask m;
  if (!mask.defined()) return m;
  require_cpu(op, mask);
  LOOM_CHECK(mask.dtype() == DType::b8 || mask.dtype() == x.dtype(),
             "{}: mask must be bool (true = masked) or {} like the input (additive), got {}", op,
             dtype_name(x.dtype()), dtype_name(mask.dtype()));
  LOOM_CHECK(mask.dim() <= x.dim() && kernels::broadcast_shapes(x.shape(), mask.shape(), op) == x.shape(),
             "{}: mask of shape {} cannot be broadcast to the input's shape {}", op, mask.shape(), x.shape());
  Shape strides = kernels::broadcast_strides(mask, x.shape());
  m.kind = mask.dtype() == DType::b8 ? MaskKind::boolean : MaskKind::additive;
  m.data = mask.raw_data();
  // Row offsets listed once with an odometer (no per-row divisions: attention
  // rows are short, and strided_offset's divides cost as much as the row).
  Shape outer_sizes(x.shape().begin(), x.shape().end() - 1), outer_strides(strides.begin(), strides.end() - 1);
  const int64_t rows = shape_numel(outer_sizes);
  m.row_bases.resize(rows);
  Shape index(outer_sizes.size(), 0);
  int64_t offset = 0;
  for (int64_t r = 0; r < rows; ++r) {
    m.row_bases[r] = offset;
    for (int64_t d = static_cast<int64_t>(index.size()) - 1; d >= 0; --d) {
      offset += outer_strides[d];
      if (++index[d] < outer_sizes[d]) break;
      offset -= outer_strides[d] * outer_sizes[d];
      index[d] = 0;
    }
  }
  m.step = strides.back();
  return m;
}

// The logit of element j of a row after masking: x + mask, or -inf where a bool mask is true.
template <MaskKind K, typename T, typename Step>
inline T masked_logit(T x, const void* mask_row, Step step, int64_t j) {
  if constexpr (K == MaskKind::none) return x;
  else if constexpr (K == MaskKind::additive) return x + static_cast<const T*>(mask_row)[j * step];
  // Read as bytes: GCC does not vectorize loads of bool.
  else return static_cast<const uint8_t*>(mask_row)[j * step] != 0 ? kNegInf<T> : x;
}

// Calls fn(step) with the mask's step along a row as a compile-time 1 when it
// is 1 (the common case: a contiguous mask row), so the row loops vectorize.
template <typename Fn>
void with_mask_step(const RowMask& m, Fn&& fn) {
  if (m.step == 1 || m.kind == MaskKind::none) fn(std::integral_constant<int64_t, 1>{});
  else fn(m.step);
}

// Calls fn(std::integral_constant<MaskKind, K>{}) for the mask's kind, so the
// row loops are compiled once per kind with no per-element branch on it.
template <typename Fn>
void dispatch_mask(const RowMask& m, Fn&& fn) {
  switch (m.kind) {
    case MaskKind::none: fn(std::integral_constant<MaskKind, MaskKind::none>{}); break;
    case MaskKind::additive: fn(std::integral_constant<MaskKind, MaskKind::additive>{}); break;
    case MaskKind::boolean: fn(std::integral_constant<MaskKind, MaskKind::boolean>{}); break;
  }
}

// Row r of the mask for float type T (an additive mask is T, a bool mask one byte).
template <typename T>
inline const void* mask_row_ptr(const RowMask& m, int64_t r) {
  if (m.kind == MaskKind::none) return nullptr;
  int64_t element_size = m.kind == MaskKind::boolean ? 1 : static_cast<int64_t>(sizeof(T));
  return static_cast<const char*>(m.data) + m.row_base(r) * element_size;
}

// ---- short float32 rows (attention: one row per query, as long as the key sequence) ----
// The auto-vectorizer needs rows longer than these: with a bool mask it
// vectorizes 32 elements at a time, so a row of 24 ran in its scalar remainder.
// A short row is instead held in registers as whole f32x8 vectors, its ragged
// end padded with -inf (adds 0 to a sum of exponentials, never wins a max).
inline constexpr int64_t kShortRow = kSumBlock;  // rounding bounded as in blocked_row_sum

struct VectorRow {
  kernels::f32x8 lanes[kShortRow / kernels::kF32Lanes];
  int64_t count = 0;  // vectors in use: ceil(n / 8)
  int64_t n = 0;      // elements

  int64_t width(int64_t c) const { return std::min(kernels::kF32Lanes, n - c * kernels::kF32Lanes); }
  kernels::f32x8 max() const {
    kernels::f32x8 m = lanes[0];
    for (int64_t c = 1; c < count; ++c) m = kernels::max_lanes(m, lanes[c]);
    return m;
  }
  void store(float* out) const {
    for (int64_t c = 0; c < count; ++c) kernels::store_lanes(out + c * kernels::kF32Lanes, lanes[c], width(c));
  }
};

// The masked logits z of a row of n <= kShortRow floats, as vectors.
template <MaskKind K, typename Step>
void load_masked_row(VectorRow& row, const float* x, const void* mask_row, Step step, int64_t n) {
  using namespace kernels;
  row.n = n;
  row.count = (n + kF32Lanes - 1) / kF32Lanes;
  for (int64_t c = 0; c < row.count; ++c) {
    const int64_t j = c * kF32Lanes, width = row.width(c);
    f32x8 z = load_lanes(x + j, width, kNegInf<float>);
    if constexpr (K != MaskKind::none) {
      if constexpr (std::is_same_v<Step, std::integral_constant<int64_t, 1>>) {
        if constexpr (K == MaskKind::additive) z += load_lanes(static_cast<const float*>(mask_row) + j, width);
        else z = select(load_byte_lanes(static_cast<const uint8_t*>(mask_row) + j, width) != 0,
                        splat<f32x8>(kNegInf<float>), z);
      } else {  // a strided mask row: lane by lane
        for (int64_t l = 0; l < width; ++l) z[l] = masked_logit<K>(z[l], mask_row, step, j + l);
      }
    }
    row.lanes[c] = z;
  }
}

// The statistics softmax and log_softmax share, for short float rows taken
// kRowGroup at a time: one row alone is a chain of dependent steps (max, then
// exponentials, then their sum, then 1/sum or log sum), too short to keep the
// core busy; the rows of a group are independent, so their chains overlap, and
// the group's final step is one vector operation across its rows.
inline constexpr int64_t kRowGroup = kernels::kF32Lanes;

struct RowGroup {
  VectorRow rows[kRowGroup];  // masked logits z, or exp(z - max) when kept
  float max[kRowGroup];       // max z per row (-inf: fully masked)
  kernels::f32x8 totals{};    // lane i: sum exp(z - max) of row i
  int64_t first = 0, count = 0;
};

// finish(group) for each group of rows of x (n <= kShortRow) under `mask`;
// KeepExp stores exp(z - max) in place of z.
template <MaskKind K, bool KeepExp, typename Finish>
void softmax_row_groups(const float* x, const RowMask& mask, RowShape s, Finish finish) {
  const int64_t n = s.size, groups = (s.rows + kRowGroup - 1) / kRowGroup;
  with_mask_step(mask, [&](auto step) {
    parallel_rows(groups, n * kRowGroup, [&](int64_t group) {
      RowGroup g;
      g.first = group * kRowGroup;
      g.count = std::min(kRowGroup, s.rows - g.first);
      for (int64_t i = 0; i < g.count; ++i) {
        const int64_t r = g.first + i;
        load_masked_row<K>(g.rows[i], x + r * n, mask_row_ptr<float>(mask, r), step, n);
        g.max[i] = kernels::max_across(g.rows[i].max());
      }
      kernels::f32x8 sums[kRowGroup];
      for (int64_t i = 0; i < g.count; ++i) {
        VectorRow& row = g.rows[i];
        kernels::f32x8 sum{};
        for (int64_t c = 0; c < row.count; ++c) {
          kernels::f32x8 e = kernels::exp_approx<kernels::f32x8, /*NonPositive=*/true>(row.lanes[c] - g.max[i]);
          if constexpr (KeepExp) row.lanes[c] = e;
          sum += e;
        }
        sums[i] = sum;
      }
      for (int64_t i = g.count; i < kRowGroup; ++i) sums[i] = kernels::f32x8{};  // a short last group
      g.totals = kernels::add_across_each(sums);
      finish(g);
    });
  });
}

// Moves `dim` to the end (a transposed view) so a last-dim kernel can run over it.
inline Tensor move_to_last(const Tensor& t, int64_t dim) {
  return dim == t.dim() - 1 ? t : transpose(t, dim, -1);
}

// ---- the shared shell of the masked row ops (softmax, log_softmax) ----
inline void check_row_input(std::string_view op, const Tensor& x) {
  require_cpu(op, x);
  LOOM_CHECK(is_floating(x.dtype()), "{}: expected float32 or float64, got {}", op, dtype_name(x.dtype()));
  LOOM_CHECK(x.dim() >= 1, "{}: expected at least 1 dim, got a 0-d tensor", op);
}

// out = kernel over the rows of x (last dim) with `mask`, dtype and mask kind
// dispatched once: kernel(TypeTag<T>, integral_constant<MaskKind, K>, out, x, mask, shape).
template <typename Kernel>
Tensor masked_rows(std::string_view op, const Tensor& x, const Tensor& mask, Kernel kernel) {
  check_row_input(op, x);
  RowMask m = row_mask(op, mask, x);
  Tensor xd = dense(x);
  Tensor out = Tensor::empty(x.shape(), {x.dtype(), x.device()});
  dispatch_floating(x.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    dispatch_mask(m, [&](auto kind) { kernel(tag, kind, out.data<T>(), xd.data<T>(), m, row_shape(x)); });
  });
  return out;
}

// A last-dim row op applied along any `dim`: moved last (mask too) and back.
template <typename LastDimOp>
Tensor along_dim(std::string_view op, const Tensor& x, int64_t dim, const Tensor& mask, LastDimOp last_dim_op) {
  check_row_input(op, x);
  int64_t d = wrap_dim(dim, x.dim(), op);
  if (d == x.dim() - 1) return last_dim_op(x, mask);
  row_mask(op, mask, x);  // check the mask against x before moving dims
  Tensor m = mask.defined() ? move_to_last(expand(mask, x.shape()), d) : mask;
  return move_to_last(last_dim_op(move_to_last(x, d), m), d);
}

// out = kernel(out, y, g, shape) for a row op's backward, inputs checked and made dense.
template <typename Kernel>
Tensor row_backward(std::string_view op, const Tensor& y, const Tensor& grad, Kernel kernel) {
  check_row_input(op, y);
  check_same_kind(op, y, grad);
  LOOM_CHECK(y.shape() == grad.shape(), "{}: y has shape {} but grad has shape {}", op, y.shape(), grad.shape());
  Tensor yd = dense(y), gd = dense(grad);
  Tensor out = Tensor::empty(y.shape(), {y.dtype(), y.device()});
  dispatch_floating(y.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    kernel(out.data<T>(), yd.data<T>(), gd.data<T>(), row_shape(y));
  });
  return out;
}

// ---- sample helpers for the registrations ----
// loom::causal_mask(t) as an additive float64 mask: 0 where visible, -inf where masked.
inline Tensor causal_additive(int64_t t) {
  Tensor m = Tensor::empty({t, t}, {DType::f64});
  double* p = m.data<double>();
  for (int64_t i = 0; i < t; ++i)
    for (int64_t j = 0; j < t; ++j) p[i * t + j] = j > i ? kNegInf<double> : 0.0;
  return m;
}

}  // namespace loom::detail
