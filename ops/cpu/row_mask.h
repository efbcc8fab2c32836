#pragma once
// A mask read in place as broadcast along the rows of x, for the CPU row kernels.
#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "loom/kernel_table.h"
#include "loom/ops/kernel_signatures.h"
#include "row_loops.h"

namespace loom::detail {

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
  const T* row(int64_t r) const {
    return static_cast<const T*>(data) + row_base(r);
  }
};

// Views `mask` (checked by the op: bool or x's dtype, broadcastable to x) as
// broadcast along x's rows.
inline RowMask row_mask(const Tensor& mask, const Tensor& x) {
  RowMask m;
  if (!mask.defined()) return m;
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
  if constexpr (K == MaskKind::none)
    return x;
  else if constexpr (K == MaskKind::additive)
    return x + static_cast<const T*>(mask_row)[j * step];
  // Read as bytes: GCC does not vectorize loads of bool.
  else
    return static_cast<const uint8_t*>(mask_row)[j * step] != 0 ? kNegInf<T> : x;
}

// Calls fn(step) with the mask's step along a row as a compile-time 1 when it
// is 1 (the common case: a contiguous mask row), so the row loops vectorize.
template <typename Fn>
void with_mask_step(const RowMask& m, Fn&& fn) {
  if (m.step == 1 || m.kind == MaskKind::none)
    fn(std::integral_constant<int64_t, 1>{});
  else
    fn(m.step);
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

// kernel(tag, integral_constant<MaskKind, K>, out, x, mask, shape) over the rows of
// dense x: dtype T and the mask's kind fixed at compile time, once per call.
template <typename T, typename Kernel>
void run_masked_rows(const Tensor& out, const Tensor& x, const Tensor& mask, Kernel kernel) {
  RowMask m = row_mask(mask, x);
  dispatch_mask(m, [&](auto kind) { kernel(kind, out.data<T>(), x.data<T>(), m, row_shape(x)); });
}

// Row r of the mask for float type T (an additive mask is T, a bool mask one byte).
template <typename T>
inline const void* mask_row_ptr(const RowMask& m, int64_t r) {
  if (m.kind == MaskKind::none) return nullptr;
  int64_t element_size = m.kind == MaskKind::boolean ? 1 : static_cast<int64_t>(sizeof(T));
  return static_cast<const char*>(m.data) + m.row_base(r) * element_size;
}

// ---- bfloat16 rows through float32's row loops (row_loops.h's chunks) ----

// kernel(kind, out, x, mask, shape) of float32 rows run on bfloat16 x: each chunk of
// rows widened into float32 scratch (an additive mask's rows too), the kernel run on
// it, its results rounded once into out. Each row is computed by one thread in one
// order, as in float32.
template <typename Kernel>
void run_masked_rows_bf16(const Tensor& out, const Tensor& x, const Tensor& mask, Kernel kernel) {
  const RowMask m = row_mask(mask, x);
  const RowShape s = row_shape(x);
  const int64_t n = s.size;
  const bfloat16* px = x.data<bfloat16>();
  bfloat16* po = out.data<bfloat16>();
  for_each_row_chunk(s, [&](int64_t, int64_t first, int64_t count) {
    float* xs = row_scratch(3 * count * n);
    float *ys = xs + count * n, *ms = ys + count * n;
    widen(px + first * n, count * n, xs);
    RowMask chunk;
    chunk.kind = m.kind;
    if (m.kind == MaskKind::boolean) {
      chunk.data = m.data, chunk.step = m.step;
      chunk.row_bases.assign(m.row_bases.begin() + first, m.row_bases.begin() + first + count);
    } else if (m.kind == MaskKind::additive) {
      for (int64_t r = 0; r < count; ++r) {
        const bfloat16* mr = m.row<bfloat16>(first + r);
        for (int64_t j = 0; j < n; ++j) ms[r * n + j] = mr[j * m.step];
        chunk.row_bases.push_back(r * n);
      }
      chunk.data = ms, chunk.step = 1;
    }
    dispatch_mask(chunk, [&](auto kind) { kernel(kind, ys, xs, chunk, RowShape{count, n}); });
    narrow(ys, count * n, po + first * n);
  });
}

// kernel(out, y, g, shape) of float32 rows (a row op's backward) run on bfloat16 y and g.
template <typename Kernel>
void run_rows_bf16(const Tensor& out, const Tensor& y, const Tensor& g, Kernel kernel) {
  const RowShape s = row_shape(y);
  const int64_t n = s.size;
  const bfloat16 *py = y.data<bfloat16>(), *pg = g.data<bfloat16>();
  bfloat16* po = out.data<bfloat16>();
  for_each_row_chunk(s, [&](int64_t, int64_t first, int64_t count) {
    float* ys = row_scratch(3 * count * n);
    float *gs = ys + count * n, *os = gs + count * n;
    widen(py + first * n, count * n, ys);
    widen(pg + first * n, count * n, gs);
    kernel(os, ys, gs, RowShape{count, n});
    narrow(os, count * n, po + first * n);
  });
}

// Registers a masked row op's bfloat16 CPU kernels and its backward's from its float32
// loops: Rows{}(kind, fast, y, x, mask, shape) runs the forward's fast or reference
// loop (a captureless lambda), BackwardFast and BackwardReference the backward's.
template <typename Rows, void (*BackwardFast)(float*, const float*, const float*, RowShape),
          void (*BackwardReference)(float*, const float*, const float*, RowShape)>
void register_bf16_row_kernels(std::string_view op, std::string_view backward_op) {
  register_kernel<kernels::MaskedRowsKernel>(
      op, DeviceType::cpu, DType::bf16,
      [](const Tensor& out, const Tensor& x, const Tensor& mask) {
        run_masked_rows_bf16(out, x, mask, [](auto kind, auto... args) { Rows{}(kind, true, args...); });
      },
      [](const Tensor& out, const Tensor& x, const Tensor& mask) {
        run_masked_rows_bf16(out, x, mask, [](auto kind, auto... args) { Rows{}(kind, false, args...); });
      });
  register_kernel<kernels::RowBackwardKernel>(
      backward_op, DeviceType::cpu, DType::bf16,
      [](const Tensor& out, const Tensor& y, const Tensor& g) { run_rows_bf16(out, y, g, BackwardFast); },
      [](const Tensor& out, const Tensor& y, const Tensor& g) { run_rows_bf16(out, y, g, BackwardReference); });
}

}  // namespace loom::detail
