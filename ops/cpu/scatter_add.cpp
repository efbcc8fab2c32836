// CPU kernels of scatter_add (ops/src/scatter_add.cpp). Fast: a thread owns whole
// output columns (every position except along dim) and adds into each in index
// order (deterministic, no atomics); the plain reference adds every src element
// in row-major order, per output element the same order.
#include <algorithm>

#include "index_loops.h"
#include "loom/kernel_table.h"
#include "loom/kernels/loops.h"
#include "loom/ops/kernel_signatures.h"
#include "type_lists.h"

namespace loom {

namespace {
template <typename T>
void scatter_add_kernel(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src) {
  detail::check_index_range("scatter_add", index, dim, out.shape());
  const Shape& ishape = index.shape();
  // out (contiguous) written through the box of index's shape.
  detail::DimGeometry og = detail::dim_geometry(detail::box_over(ishape, dim, out.shape()), out.strides(), dim);
  const int64_t n = ishape[dim], inner = og.inner;
  const int64_t column_blocks = (inner + detail::kScatterColumns - 1) / detail::kScatterColumns;
  const int64_t items = og.outer * column_blocks;
  const int64_t* pi = index.data<int64_t>();
  const T* ps = src.data<T>();
  T* po = out.data<T>();
#pragma omp parallel for schedule(static) if (index.numel() >= kernels::kParallelGrain && !omp_in_parallel())
  for (int64_t item = 0; item < items; ++item) {
    int64_t o = item / column_blocks, c0 = (item % column_blocks) * detail::kScatterColumns;
    int64_t c1 = std::min(inner, c0 + detail::kScatterColumns);
    T* obase = po + og.outer_offset(o);
    for (int64_t j = 0; j < n; ++j) {
      const int64_t* irow = pi + (o * n + j) * inner;
      const T* srow = ps + (o * n + j) * inner;
      for (int64_t i = c0; i < c1; ++i) obase[irow[i] * og.dim_stride + og.inner_offset(i)] += srow[i];
    }
  }
}

template <typename T>
void reference_scatter_add(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src) {
  detail::check_index_range("scatter_add", index, dim, out.shape());
  const int64_t* pi = index.data<int64_t>();
  const T* ps = src.data<T>();
  T* po = out.data<T>();
  for (int64_t p = 0; p < index.numel(); ++p) {
    Shape c = detail::coordinates(p, index.shape());
    c[dim] = pi[p];
    po[detail::offset_of(c, out.strides())] += ps[p];
  }
}

template <typename T>
void register_for() {
  register_kernel<kernels::IndexAccumulateKernel>("scatter_add", DeviceType::cpu, dtype_of<T>(), scatter_add_kernel<T>,
                                                  reference_scatter_add<T>);
}
}  // namespace

LOOM_KERNELS(cpu_scatter_add) {
  kernels::for_each_type(NumericTypes{}, [](auto tag) { register_for<typename decltype(tag)::type>(); });
}

}  // namespace loom
