#pragma once
// The reduction engine: reduces `x` over `dims` into a contiguous `out` (with
// the reduced dims removed or kept as size 1). A Reducer says how:
//   using Acc = ...;  Acc init() const;  void add(Acc&, T) const;
//   void merge(Acc&, const Acc&) const;  Out finish(const Acc&, int64_t count) const;
// and optionally, for unit-stride runs, a vectorizable span hook:
//   void add_span(Acc&, const T* p, int64_t n) const;
// (several independent accumulators combined in a fixed order; see kSpanLanes),
// and, for reducing over rows with the kept elements contiguous (a column sum),
//   void add_rows(Acc* acc, const T* const* rows, int64_t nrows, int64_t width) const;
// which adds a block of kRowBlock rows (rows[k][0, width)) into acc[0, width).
// Every output element is reduced in the same order whatever the thread count
// (fixed-size blocks, merged in order), so results are bitwise reproducible.
// Between blocks the loops look at the interrupt request (loom/interrupt.h).
#include <omp.h>

#include <algorithm>
#include <limits>
#include <vector>

#include "loom/kernels/loops.h"

namespace loom::kernels {

inline constexpr int64_t kReduceBlock = 16384;  // fixed block: thread-count independent

// Which end max/min-like reductions keep: amax and argmax the largest, amin and argmin the smallest.
enum class Extreme { largest, smallest };
template <Extreme E, typename T>
bool beats(T v, T best) {
  return E == Extreme::largest ? v > best : v < best;
}
// Where a running max (min) starts: beaten by every value.
template <typename T, Extreme E>
T worst_value() {
  using limits = std::numeric_limits<T>;
  if constexpr (!limits::has_infinity) {
    return E == Extreme::largest ? limits::lowest() : limits::max();
  } else if constexpr (E == Extreme::largest) {
    return -limits::infinity();
  } else {
    return limits::infinity();
  }
}
// Independent accumulators a span hook keeps: one long dependency chain becomes
// kSpanLanes short ones the compiler can put in vector registers. The lanes are
// combined in lane order, so a span's result depends only on the span.
inline constexpr int kSpanLanes = 8;

// Rows per add_rows call: a fixed block counted from the first row.
inline constexpr int64_t kRowBlock = 16;

template <typename R, typename T>
concept RowsReducer = requires(const R& r, typename R::Acc* acc, const T* const* rows, int64_t n) {
  r.add_rows(acc, rows, n, n);
};

template <typename R, typename T>
concept SpanReducer = requires(const R& r, typename R::Acc& acc, const T* p, int64_t n) {
  r.add_span(acc, p, n);
};

// A span hook built from a Reducer's add/merge: kSpanLanes accumulators, lane l
// taking elements l, l + kSpanLanes, ...; then lanes merged in order, then the tail.
template <typename R, typename T>
void add_span_lanes(const R& r, typename R::Acc& acc, const T* p, int64_t n) {
  typename R::Acc lane[kSpanLanes];
  for (int l = 0; l < kSpanLanes; ++l) lane[l] = r.init();
  int64_t i = 0;
  for (; i + kSpanLanes <= n; i += kSpanLanes)
    for (int l = 0; l < kSpanLanes; ++l) r.add(lane[l], p[i + l]);
  for (int l = 0; l < kSpanLanes; ++l) r.merge(acc, lane[l]);
  for (; i < n; ++i) r.add(acc, p[i]);
}

struct ReducePlan {
  Shape kept_sizes, kept_strides;        // over the output elements
  Shape reduced_sizes, reduced_strides;  // over one output's inputs
  int64_t kept = 1, reduced = 1;
};

// Splits x's dims into kept and reduced ones (dims already wrapped, sorted, unique).
inline ReducePlan plan_reduction(const Tensor& x, const Shape& dims) {
  ReducePlan plan;
  std::vector<bool> is_reduced(x.dim(), false);
  for (int64_t d : dims) is_reduced[d] = true;
  for (int64_t d = 0; d < x.dim(); ++d) {
    if (is_reduced[d]) {
      plan.reduced_sizes.push_back(x.shape()[d]);
      plan.reduced_strides.push_back(x.strides()[d]);
      plan.reduced *= x.shape()[d];
    } else {
      plan.kept_sizes.push_back(x.shape()[d]);
      plan.kept_strides.push_back(x.strides()[d]);
      plan.kept *= x.shape()[d];
    }
  }
  return plan;
}

// Reduces the `count` elements of a strided index space starting at `base`.
template <typename T, typename R>
void reduce_span(const T* base, const Loop<1>& loop, int64_t begin, int64_t end, const R& r, typename R::Acc& acc) {
  auto segment = [&](int64_t n, const std::array<int64_t, 1>& off, const std::array<int64_t, 1>& st) {
    const T* p = base + off[0];
    if (st[0] == 1) {
      if constexpr (SpanReducer<R, T>)
        r.add_span(acc, p, n);
      else
        for (int64_t i = 0; i < n; ++i) r.add(acc, p[i]);
    } else {
      for (int64_t i = 0; i < n; ++i) r.add(acc, p[i * st[0]]);
    }
  };
  run_range(loop, begin, end, segment);
}

template <typename T, typename Out, typename R>
void reduce_loop(const Tensor& out, const Tensor& x, const Shape& dims, const R& r) {
  ReducePlan plan = plan_reduction(x, dims);
  const T* px = static_cast<const T*>(x.storage()->data()) + x.offset();
  Out* po = static_cast<Out*>(out.storage()->data()) + out.offset();
  Loop<1> reduced_loop = make_loop<1>(plan.reduced_sizes, {plan.reduced_strides});
  const int64_t kept = plan.kept, reduced = plan.reduced;
  auto kept_offset = [&](int64_t k) { return strided_offset(k, plan.kept_sizes, plan.kept_strides); };
  const bool parallel = kept * reduced >= kParallelGrain && !omp_in_parallel();

  if (kept == 1) {
    // A full reduction: fixed blocks reduced in parallel, merged in order.
    int64_t blocks = std::max<int64_t>(1, (reduced + kReduceBlock - 1) / kReduceBlock);
    std::vector<typename R::Acc> partial(blocks, r.init());
#pragma omp parallel for schedule(static) if (parallel && blocks > 1)
    for (int64_t b = 0; b < blocks; ++b)
      if (!detail::stop_kernel_early())  // an interrupt request: the rest is skipped, and the call throws
        reduce_span(px, reduced_loop, b * kReduceBlock, std::min(reduced, (b + 1) * kReduceBlock), r, partial[b]);
    for (int64_t b = 1; b < blocks; ++b) r.merge(partial[0], partial[b]);
    po[0] = r.finish(partial[0], reduced);
    return;
  }

  Loop<1> kept_loop = make_loop<1>(plan.kept_sizes, {plan.kept_strides});
  if (kept_loop.sizes.size() == 1 && kept_loop.strides[0][0] == 1 && reduced > 1) {
    // Kept elements contiguous in x (e.g. summing a [N, D] gradient over N):
    // walk the reduced index in order and update a block of outputs at a time.
    constexpr int64_t kColumns = 256;
    int64_t column_blocks = (kept + kColumns - 1) / kColumns;
#pragma omp parallel for schedule(static) if (parallel && column_blocks > 1)
    for (int64_t cb = 0; cb < column_blocks; ++cb) {
      int64_t c0 = cb * kColumns, c1 = std::min(kept, c0 + kColumns);
      std::vector<typename R::Acc> acc(c1 - c0, r.init());
      if constexpr (RowsReducer<R, T>) {
        // Blocks of kRowBlock rows handed to the reducer (which may keep a short
        // float partial per block in registers): fixed blocks, added in row order.
        const T* rows[kRowBlock];
        for (int64_t j0 = 0; j0 < reduced && !detail::stop_kernel_early(); j0 += kRowBlock) {
          const int64_t nr = std::min(kRowBlock, reduced - j0);
          for (int64_t k = 0; k < nr; ++k)
            rows[k] = px + strided_offset(j0 + k, plan.reduced_sizes, plan.reduced_strides) + c0;
          r.add_rows(acc.data(), rows, nr, c1 - c0);
        }
      } else {
        for (int64_t j = 0; j < reduced && !detail::stop_kernel_early(); ++j) {
          const T* row = px + strided_offset(j, plan.reduced_sizes, plan.reduced_strides);
          for (int64_t c = c0; c < c1; ++c) r.add(acc[c - c0], row[c]);
        }
      }
      for (int64_t c = c0; c < c1; ++c) po[c] = r.finish(acc[c - c0], reduced);
    }
    return;
  }

  if constexpr (SpanReducer<R, T>) {
    if (kept_loop.sizes.size() == 1 && reduced_loop.sizes.size() == 1 && reduced_loop.strides[0][0] == 1) {
      // Rows of a contiguous last dim (e.g. a sum over the last dim): each output's
      // span straight to the span hook, without the general index walk per output.
      const int64_t row_stride = kept_loop.strides[0][0];
#pragma omp parallel for schedule(static) if (parallel)
      for (int64_t k = 0; k < kept; ++k) {
        if (detail::stop_kernel_early()) continue;
        typename R::Acc acc = r.init();
        r.add_span(acc, px + k * row_stride, reduced);
        po[k] = r.finish(acc, reduced);
      }
      return;
    }
  }

  // General case: each output element reduces its own span.
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t k = 0; k < kept; ++k) {
    if (detail::stop_kernel_early()) continue;
    typename R::Acc acc = r.init();
    reduce_span(px + kept_offset(k), reduced_loop, 0, reduced, r, acc);
    po[k] = r.finish(acc, reduced);
  }
}

// The plain reference: for each output, loop over its inputs in index order.
template <typename T, typename Out, typename R>
void reference_reduce(const Tensor& out, const Tensor& x, const Shape& dims, const R& r) {
  ReducePlan plan = plan_reduction(x, dims);
  const T* px = static_cast<const T*>(x.storage()->data()) + x.offset();
  Out* po = static_cast<Out*>(out.storage()->data()) + out.offset();
  for (int64_t k = 0; k < plan.kept; ++k) {
    typename R::Acc acc = r.init();
    int64_t base = strided_offset(k, plan.kept_sizes, plan.kept_strides);
    for (int64_t j = 0; j < plan.reduced; ++j)
      r.add(acc, px[base + strided_offset(j, plan.reduced_sizes, plan.reduced_strides)]);
    po[k] = r.finish(acc, plan.reduced);
  }
}

// The plain reference for reductions that need several passes (var, logsumexp):
// out[k] = value(at, count), where at(j) reads input j of output k as double.
template <typename T, typename Value>
void reference_reduce_each(const Tensor& out, const Tensor& x, const Shape& dims, Value value) {
  ReducePlan plan = plan_reduction(x, dims);
  const T* px = static_cast<const T*>(x.storage()->data()) + x.offset();
  T* po = static_cast<T*>(out.storage()->data()) + out.offset();
  for (int64_t k = 0; k < plan.kept; ++k) {
    const T* base = px + strided_offset(k, plan.kept_sizes, plan.kept_strides);
    auto at = [&](int64_t j) {
      return static_cast<double>(base[strided_offset(j, plan.reduced_sizes, plan.reduced_strides)]);
    };
    po[k] = static_cast<T>(value(at, plan.reduced));
  }
}

}  // namespace loom::kernels
