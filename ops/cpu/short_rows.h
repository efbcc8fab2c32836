#pragma once
// Short float32 rows (attention) held in registers, taken 8 at a time.
#include "loom/kernels/simd.h"
#include "loom/kernels/vec_math.h"
#include "row_mask.h"
#include "row_sums.h"

namespace loom::detail {

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
        if constexpr (K == MaskKind::additive)
          z += load_lanes(static_cast<const float*>(mask_row) + j, width);
        else
          z = select(load_byte_lanes(static_cast<const uint8_t*>(mask_row) + j, width) != 0,
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

}  // namespace loom::detail
