// CPU kernels of gather (ops/src/gather.cpp): rows of index's box read through
// precomputed offsets, beside the plain reference (coordinates per element).
#include "index_loops.h"
#include "loom/kernel_table.h"
#include "loom/kernels/loops.h"
#include "loom/ops/kernel_signatures.h"
#include "type_lists.h"

namespace loom {

namespace {
template <typename T>
void gather_kernel(const Tensor& out, const Tensor& x, int64_t dim, const Tensor& index) {
  detail::check_index_range("gather", index, dim, x.shape());
  const Shape& ishape = index.shape();
  // x read as the box of index's shape (the indexed dim spans all of x's).
  detail::DimGeometry xg = detail::dim_geometry(detail::box_over(ishape, dim, x.shape()), x.strides(), dim);
  const int64_t n = ishape[dim], inner = xg.inner, rows = xg.outer * n;
  const T* px = static_cast<const T*>(x.storage()->data()) + x.offset();
  const int64_t* pi = index.data<int64_t>();
  T* po = out.data<T>();
#pragma omp parallel for schedule(static) if (out.numel() >= kernels::kParallelGrain && !omp_in_parallel())
  for (int64_t r = 0; r < rows; ++r) {
    const T* xrow = px + xg.outer_offset(r / n);
    const int64_t* irow = pi + r * inner;
    T* orow = po + r * inner;
    for (int64_t i = 0; i < inner; ++i) orow[i] = xrow[irow[i] * xg.dim_stride + xg.inner_offset(i)];
  }
}

template <typename T>
void reference_gather(const Tensor& out, const Tensor& x, int64_t dim, const Tensor& index) {
  detail::check_index_range("gather", index, dim, x.shape());
  const T* px = static_cast<const T*>(x.storage()->data()) + x.offset();
  const int64_t* pi = index.data<int64_t>();
  T* po = out.data<T>();
  for (int64_t p = 0; p < out.numel(); ++p) {
    Shape c = detail::coordinates(p, index.shape());
    c[dim] = pi[p];
    po[p] = px[detail::offset_of(c, x.strides())];
  }
}

template <typename T>
void register_for() {
  register_kernel<kernels::IndexReadKernel>("gather", DeviceType::cpu, dtype_of<T>(), gather_kernel<T>,
                                            reference_gather<T>);
}
}  // namespace

LOOM_KERNELS(cpu_gather) {
  kernels::for_each_type(AllTypes{}, [](auto tag) { register_for<typename decltype(tag)::type>(); });
}

}  // namespace loom
