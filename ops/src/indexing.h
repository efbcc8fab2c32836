#pragma once
// Shared plumbing for the indexing ops (gather, scatter_add, index_select,
// index_add, embedding): index checks and the "outer x dim x inner" geometry
// their kernels walk.
#include <vector>

#include "elementwise.h"

namespace loom::detail {

// Index tensors are int64; returns a contiguous copy (or x itself) to read from.
inline Tensor index_values(std::string_view op, const Tensor& index) {
  LOOM_CHECK(index.dtype() == DType::i64, "{}: index must be int64, got {}", op, dtype_name(index.dtype()));
  require_cpu(op, index);
  NoGradGuard no_grad;
  return contiguous(index);
}

// Every index in [0, size): checked once, before any parallel loop (which cannot throw).
inline void check_index_range(std::string_view op, const Tensor& index, int64_t size, int64_t dim,
                              const Shape& shape) {
  const int64_t* p = index.data<int64_t>();
  for (int64_t i = 0; i < index.numel(); ++i)
    LOOM_CHECK(p[i] >= 0 && p[i] < size, "{}: index {} is out of range for dim {} of size {} (shape {})", op, p[i],
               dim, size, shape);
}

// A strided box of `sizes` over memory with `strides`, split at `dim` into
// outer (dims before), the indexed dim, and inner (dims after). Offsets of the
// outer and inner parts are precomputed so kernels add three numbers per element.
struct DimGeometry {
  int64_t outer = 1, inner = 1, dim_stride = 0;
  Shape outer_sizes, outer_strides;
  std::vector<int64_t> inner_offsets;
  int64_t outer_offset(int64_t o) const { return strided_offset(o, outer_sizes, outer_strides); }
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
  g.inner_offsets.resize(g.inner);
  for (int64_t i = 0; i < g.inner; ++i) g.inner_offsets[i] = strided_offset(i, inner_sizes, inner_strides);
  return g;
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

// Shape with dim replaced by `size`.
inline Shape with_dim(Shape shape, int64_t dim, int64_t size) {
  shape[dim] = size;
  return shape;
}

// Inner columns per work item of the scatter kernels: each item owns whole
// columns and adds into them in index order, so no two threads touch one output
// element and the summation order never depends on the thread count.
inline constexpr int64_t kScatterColumns = 256;

}  // namespace loom::detail
