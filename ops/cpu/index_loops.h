#pragma once
// CPU loop helpers of the indexing kernels (gather, scatter_add, index_select,
// index_add, embedding): the index range check every kernel runs before its
// loops, and the "outer x dim x inner" geometry the loops walk.
#include <string_view>
#include <vector>

#include "loom/error.h"
#include "loom/tensor.h"

namespace loom::detail {

// Every index (contiguous int64) in [0, shape[dim]): checked once, before any
// parallel loop (which cannot throw); the Error names the op and the bad index.
inline void check_index_range(std::string_view op, const Tensor& index, int64_t dim, const Shape& shape) {
  const int64_t* p = index.data<int64_t>();
  const int64_t size = shape[dim];
  for (int64_t i = 0; i < index.numel(); ++i)
    LOOM_CHECK(p[i] >= 0 && p[i] < size, "{}: index {} is out of range for dim {} of size {} (shape {})", op, p[i], dim,
               size, shape);
}

// A strided box of `sizes` over memory with `strides`, split at `dim` into
// outer (dims before), the indexed dim, and inner (dims after). Offsets of the
// inner part are precomputed (unless it is contiguous: offset i is i) so kernels
// add three numbers per element.
struct DimGeometry {
  int64_t outer = 1, inner = 1, dim_stride = 0;
  Shape outer_sizes, outer_strides;
  int64_t run = 1;                     // inner offsets k*run .. k*run + run - 1 are consecutive
  std::vector<int64_t> inner_offsets;  // empty when inner_contiguous()
  bool inner_contiguous() const { return run == inner; }
  int64_t outer_offset(int64_t o) const { return strided_offset(o, outer_sizes, outer_strides); }
  int64_t inner_offset(int64_t i) const { return inner_contiguous() ? i : inner_offsets[i]; }
};

inline DimGeometry dim_geometry(const Shape& sizes, const Shape& strides, int64_t dim) {
  DimGeometry g;
  Shape inner_sizes, inner_strides;
  for (int64_t d = 0; d < static_cast<int64_t>(sizes.size()); ++d) {
    if (d < dim) {
      g.outer *= sizes[d];
      g.outer_sizes.push_back(sizes[d]);
      g.outer_strides.push_back(strides[d]);
    } else if (d > dim) {
      g.inner *= sizes[d];
      inner_sizes.push_back(sizes[d]);
      inner_strides.push_back(strides[d]);
    }
  }
  g.dim_stride = sizes.empty() ? 0 : strides[dim];
  // The trailing inner dims laid out densely make runs of `run` consecutive values.
  for (size_t d = inner_sizes.size(); d-- > 0;) {
    if (inner_sizes[d] == 1) continue;
    if (inner_strides[d] != g.run) break;
    g.run *= inner_sizes[d];
  }
  if (g.inner_contiguous()) return g;  // a decoder's cache, re-gathered every step, takes this path
  // The inner offsets in row-major order, counted like an odometer.
  g.inner_offsets.resize(g.inner);
  Shape counter(inner_sizes.size(), 0);
  int64_t offset = 0;
  for (int64_t i = 0; i < g.inner; ++i) {
    g.inner_offsets[i] = offset;
    for (size_t d = inner_sizes.size(); d-- > 0;) {
      offset += inner_strides[d];
      if (++counter[d] < inner_sizes[d]) break;
      offset -= inner_strides[d] * inner_sizes[d];
      counter[d] = 0;
    }
  }
  return g;
}

// `shape` with dim resized to that of `like` (the box of an index over a tensor).
inline Shape box_over(Shape shape, int64_t dim, const Shape& like) {
  shape[dim] = like[dim];
  return shape;
}

// Row-major coordinates of element `linear` of `shape`.
inline Shape coordinates(int64_t linear, const Shape& shape) {
  Shape c(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    c[d] = linear % shape[d];
    linear /= shape[d];
  }
  return c;
}

inline int64_t offset_of(const Shape& coords, const Shape& strides) {
  int64_t off = 0;
  for (size_t d = 0; d < coords.size(); ++d) off += coords[d] * strides[d];
  return off;
}

// Inner columns per work item of the scatter kernels: each item owns whole
// columns and adds into them in index order, so no two threads touch one output
// element and the summation order never depends on the thread count.
inline constexpr int64_t kScatterColumns = 256;

}  // namespace loom::detail
