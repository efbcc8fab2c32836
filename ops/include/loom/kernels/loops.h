#pragma once
// The elementwise loop engine: broadcasting, dimension coalescing and OpenMP
// partitioning, written once for every elementwise op. Each thread takes a
// contiguous range of the output's elements, so results never depend on the
// thread count. Innermost runs where every operand has unit stride take a
// plain loop the compiler vectorizes.
#include <omp.h>

#include <array>
#include <cstdint>

#include "loom/kernel_table.h"
#include "loom/ops/shape_rules.h"
#include "loom/tensor.h"

namespace loom::kernels {

// Below this many elements a loop runs on one thread (spawning costs more).
inline constexpr int64_t kParallelGrain = 32768;

template <size_t N>
struct Loop {
  Shape sizes;                       // coalesced sizes (at least one dim)
  std::array<Shape, N> strides;      // per operand, in elements
  std::array<int64_t, N> offsets{};  // per operand base offset, in elements
  int64_t numel = 1;
};

// Builds a loop over `shape` with per-operand strides, merging dims that are
// contiguous for every operand and dropping size-1 dims.
template <size_t N>
Loop<N> make_loop(const Shape& shape, const std::array<Shape, N>& strides) {
  Loop<N> loop;
  loop.numel = shape_numel(shape);
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    bool merge = !loop.sizes.empty();
    for (size_t k = 0; k < N && merge; ++k) merge = loop.strides[k].back() == strides[k][d] * shape[d];
    if (merge) {
      loop.sizes.back() *= shape[d];
      for (size_t k = 0; k < N; ++k) loop.strides[k].back() = strides[k][d];
    } else {
      loop.sizes.push_back(shape[d]);
      for (size_t k = 0; k < N; ++k) loop.strides[k].push_back(strides[k][d]);
    }
  }
  if (loop.sizes.empty()) {
    loop.sizes.push_back(1);
    for (size_t k = 0; k < N; ++k) loop.strides[k].push_back(1);
  }
  return loop;
}

// Calls segment(count, offsets, inner_strides) for runs along the innermost dim
// covering the elements [begin, end) of the loop.
template <size_t N, typename Segment>
void run_range(const Loop<N>& loop, int64_t begin, int64_t end, Segment& segment) {
  if (begin >= end) return;
  const int64_t nd = static_cast<int64_t>(loop.sizes.size());
  const int64_t inner = loop.sizes[nd - 1];
  std::array<int64_t, N> inner_strides;
  for (size_t k = 0; k < N; ++k) inner_strides[k] = loop.strides[k][nd - 1];
  // Multi-index of `begin` over the outer dims.
  Shape index(nd, 0);
  int64_t rest = begin / inner;
  for (int64_t d = nd - 2; d >= 0; --d) {
    index[d] = rest % loop.sizes[d];
    rest /= loop.sizes[d];
  }
  int64_t position = begin % inner;
  int64_t done = begin;
  while (done < end) {
    std::array<int64_t, N> offsets;
    for (size_t k = 0; k < N; ++k) {
      int64_t off = loop.offsets[k] + position * inner_strides[k];
      for (int64_t d = 0; d < nd - 1; ++d) off += index[d] * loop.strides[k][d];
      offsets[k] = off;
    }
    int64_t count = std::min(inner - position, end - done);
    segment(count, offsets, inner_strides);
    done += count;
    position = 0;
    for (int64_t d = nd - 2; d >= 0; --d) {
      if (++index[d] < loop.sizes[d]) break;
      index[d] = 0;
    }
  }
}

// Elements between two looks at the interrupt request in a long loop (a
// millisecond or so of work): request_interrupt() stops a kernel there.
inline constexpr int64_t kInterruptBlock = int64_t{1} << 20;

// range(begin, end) on [begin, end) in blocks of kInterruptBlock, stopping early
// once an interrupt is requested (the Kernel wrapper then throws).
template <typename Range>
void interruptible_range(int64_t begin, int64_t end, Range& range) {
  for (int64_t block = begin; block < end && !detail::stop_kernel_early(); block += kInterruptBlock)
    range(block, std::min(end, block + kInterruptBlock));
}

// Calls range(begin, end) on one contiguous range of [0, n) per thread, or on all
// of it below kParallelGrain (or on one thread, or inside a parallel region); in
// blocks that each look at the interrupt request first.
template <typename Range>
void parallel_ranges(int64_t n, Range range) {
  if (n == 0) return;
  if (n < kParallelGrain || omp_get_max_threads() == 1 || omp_in_parallel()) {
    interruptible_range(0, n, range);
    return;
  }
#pragma omp parallel
  {
    int64_t threads = omp_get_num_threads(), id = omp_get_thread_num();
    // Chunks aligned to 64 elements keep each thread's vector loop whole.
    int64_t chunk = ((n + threads - 1) / threads + 63) / 64 * 64;
    int64_t begin = std::min(n, id * chunk), end = std::min(n, begin + chunk);
    if (begin < end) interruptible_range(begin, end, range);
  }
}

template <size_t N, typename Segment>
void parallel_for_each_segment(const Loop<N>& loop, Segment segment) {
  parallel_ranges(loop.numel, [&](int64_t begin, int64_t end) { run_range(loop, begin, end, segment); });
}

// out = f(a) elementwise; out is a fresh contiguous tensor of a's shape.
template <typename In, typename Out, typename F>
void unary_loop(const Tensor& out, const Tensor& a, F f) {
  Out* po = static_cast<Out*>(out.storage()->data());
  const In* pa = static_cast<const In*>(a.storage()->data());
  Loop<2> loop = make_loop<2>(out.shape(), {out.strides(), a.strides()});
  loop.offsets = {out.offset(), a.offset()};
  parallel_for_each_segment(loop, [&](int64_t n, const std::array<int64_t, 2>& off, const std::array<int64_t, 2>& st) {
    Out* o = po + off[0];
    const In* x = pa + off[1];
    if (st[0] == 1 && st[1] == 1) {
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) o[i] = f(x[i]);
    } else if (st[0] == 1 && st[1] == 0) {  // a broadcast scalar: fill_, zeros
      const Out value = static_cast<Out>(f(*x));
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) o[i] = value;
    } else {
      for (int64_t i = 0; i < n; ++i) o[i * st[0]] = f(x[i * st[1]]);
    }
  });
}

// out = f(a, b) elementwise with broadcasting; out has the broadcast shape.
template <typename In, typename Out, typename F>
void binary_loop(const Tensor& out, const Tensor& a, const Tensor& b, F f) {
  Out* po = static_cast<Out*>(out.storage()->data());
  const In* pa = static_cast<const In*>(a.storage()->data());
  const In* pb = static_cast<const In*>(b.storage()->data());
  Loop<3> loop =
      make_loop<3>(out.shape(), {out.strides(), broadcast_strides(a, out.shape()), broadcast_strides(b, out.shape())});
  loop.offsets = {out.offset(), a.offset(), b.offset()};
  parallel_for_each_segment(loop, [&](int64_t n, const std::array<int64_t, 3>& off, const std::array<int64_t, 3>& st) {
    Out* o = po + off[0];
    const In* x = pa + off[1];
    const In* y = pb + off[2];
    if (st[0] == 1 && st[1] == 1 && st[2] == 1) {
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) o[i] = f(x[i], y[i]);
    } else if (st[0] == 1 && st[1] == 1 && st[2] == 0) {
      const In yv = *y;
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) o[i] = f(x[i], yv);
    } else if (st[0] == 1 && st[1] == 0 && st[2] == 1) {
      const In xv = *x;
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) o[i] = f(xv, y[i]);
    } else {
      for (int64_t i = 0; i < n; ++i) o[i * st[0]] = f(x[i * st[1]], y[i * st[2]]);
    }
  });
}

// out = f(c, a, b) elementwise with broadcasting (where): the condition has its
// own element type C; out has the broadcast shape of all three.
template <typename C, typename In, typename Out, typename F>
void ternary_loop(const Tensor& out, const Tensor& c, const Tensor& a, const Tensor& b, F f) {
  Out* po = static_cast<Out*>(out.storage()->data());
  const C* pc = static_cast<const C*>(c.storage()->data());
  const In* pa = static_cast<const In*>(a.storage()->data());
  const In* pb = static_cast<const In*>(b.storage()->data());
  Loop<4> loop = make_loop<4>(out.shape(), {out.strides(), broadcast_strides(c, out.shape()),
                                            broadcast_strides(a, out.shape()), broadcast_strides(b, out.shape())});
  loop.offsets = {out.offset(), c.offset(), a.offset(), b.offset()};
  parallel_for_each_segment(loop, [&](int64_t n, const std::array<int64_t, 4>& off, const std::array<int64_t, 4>& st) {
    Out* o = po + off[0];
    const C* k = pc + off[1];
    const In* x = pa + off[2];
    const In* y = pb + off[3];
    if (st[0] == 1 && st[1] == 1 && st[2] == 1 && st[3] == 1) {
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) o[i] = f(k[i], x[i], y[i]);
    } else if (st[0] == 1 && st[1] == 1 && st[2] == 1 && st[3] == 0) {
      // where(cond, g, 0): the shape of every where/masked_fill backward.
      const In yv = *y;
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) o[i] = f(k[i], x[i], yv);
    } else if (st[0] == 1 && st[1] == 1 && st[2] == 0 && st[3] == 1) {
      const In xv = *x;
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) o[i] = f(k[i], xv, y[i]);
    } else {
      for (int64_t i = 0; i < n; ++i) o[i * st[0]] = f(k[i * st[1]], x[i * st[2]], y[i * st[3]]);
    }
  });
}

// ---- reference kernels: one plain loop over logical indices, no tricks ----
template <typename In, typename Out, typename F>
void reference_unary(const Tensor& out, const Tensor& a, F f) {
  Out* o = static_cast<Out*>(out.storage()->data()) + out.offset();
  const In* x = static_cast<const In*>(a.storage()->data()) + a.offset();
  for (int64_t i = 0; i < out.numel(); ++i)
    o[strided_offset(i, out.shape(), out.strides())] = f(x[strided_offset(i, a.shape(), a.strides())]);
}

template <typename In, typename Out, typename F>
void reference_binary(const Tensor& out, const Tensor& a, const Tensor& b, F f) {
  Shape sa = broadcast_strides(a, out.shape()), sb = broadcast_strides(b, out.shape());
  Out* o = static_cast<Out*>(out.storage()->data()) + out.offset();
  const In* x = static_cast<const In*>(a.storage()->data()) + a.offset();
  const In* y = static_cast<const In*>(b.storage()->data()) + b.offset();
  for (int64_t i = 0; i < out.numel(); ++i)
    o[strided_offset(i, out.shape(), out.strides())] =
        f(x[strided_offset(i, out.shape(), sa)], y[strided_offset(i, out.shape(), sb)]);
}

template <typename C, typename In, typename Out, typename F>
void reference_ternary(const Tensor& out, const Tensor& c, const Tensor& a, const Tensor& b, F f) {
  Shape sc = broadcast_strides(c, out.shape()), sa = broadcast_strides(a, out.shape()),
        sb = broadcast_strides(b, out.shape());
  Out* o = static_cast<Out*>(out.storage()->data()) + out.offset();
  const C* k = static_cast<const C*>(c.storage()->data()) + c.offset();
  const In* x = static_cast<const In*>(a.storage()->data()) + a.offset();
  const In* y = static_cast<const In*>(b.storage()->data()) + b.offset();
  for (int64_t i = 0; i < out.numel(); ++i)
    o[strided_offset(i, out.shape(), out.strides())] =
        f(k[strided_offset(i, out.shape(), sc)], x[strided_offset(i, out.shape(), sa)],
          y[strided_offset(i, out.shape(), sb)]);
}

}  // namespace loom::kernels
