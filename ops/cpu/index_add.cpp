// CPU kernels of index_add (ops/src/index_add.cpp). Fast: a thread owns whole
// output columns and adds into each in index order (deterministic, no atomics);
// the plain reference adds every source element in row-major order.
#include <algorithm>

#include "index_loops.h"
#include "loom/kernel_table.h"
#include "loom/kernels/loops.h"
#include "loom/ops/kernel_signatures.h"
#include "type_lists.h"

namespace loom {

namespace {
template <typename T>
void index_add_kernel(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& source) {
  detail::check_index_range("index_add", index, dim, out.shape());
  detail::DimGeometry og = detail::dim_geometry(out.shape(), out.strides(), dim);  // out is contiguous
  const int64_t n = index.numel(), inner = og.inner;
  const int64_t column_blocks = (inner + detail::kScatterColumns - 1) / detail::kScatterColumns;
  const int64_t items = og.outer * column_blocks;
  const int64_t* pi = index.data<int64_t>();
  const T* ps = source.data<T>();
  T* po = out.data<T>();
#pragma omp parallel for schedule(static) if (source.numel() >= kernels::kParallelGrain && !omp_in_parallel())
  for (int64_t item = 0; item < items; ++item) {
    int64_t o = item / column_blocks, c0 = (item % column_blocks) * detail::kScatterColumns;
    int64_t c1 = std::min(inner, c0 + detail::kScatterColumns);
    for (int64_t j = 0; j < n; ++j) {
      T* orow = po + og.outer_offset(o) + pi[j] * og.dim_stride;
      const T* srow = ps + (o * n + j) * inner;
#pragma omp simd
      for (int64_t i = c0; i < c1; ++i) orow[i] += srow[i];
    }
  }
}

template <typename T>
void reference_index_add(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& source) {
  detail::check_index_range("index_add", index, dim, out.shape());
  const int64_t* pi = index.data<int64_t>();
  const T* ps = source.data<T>();
  T* po = out.data<T>();
  for (int64_t p = 0; p < source.numel(); ++p) {
    Shape c = detail::coordinates(p, source.shape());
    c[dim] = pi[c[dim]];
    po[detail::offset_of(c, out.strides())] += ps[p];
  }
}

template <typename T>
void register_for() {
  register_kernel<kernels::IndexAccumulateKernel>("index_add", DeviceType::cpu, dtype_of<T>(), index_add_kernel<T>,
                                                  reference_index_add<T>);
}
}  // namespace

LOOM_KERNELS(cpu_index_add) {
  kernels::for_each_type(NumericTypes{}, [](auto tag) { register_for<typename decltype(tag)::type>(); });
}

}  // namespace loom
