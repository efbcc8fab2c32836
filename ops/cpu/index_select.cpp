// CPU kernels of index_select (ops/src/index_select.cpp): whole rows (or their
// dense runs) copied per index, beside the plain reference (coordinates per element).
#include <algorithm>

#include "index_loops.h"
#include "loom/kernel_table.h"
#include "loom/kernels/loops.h"
#include "loom/ops/kernel_signatures.h"
#include "type_lists.h"

namespace loom {

namespace {
template <typename T>
void index_select_kernel(const Tensor& out, const Tensor& x, int64_t dim, const Tensor& index) {
  detail::check_index_range("index_select", index, dim, x.shape());
  detail::DimGeometry xg = detail::dim_geometry(x.shape(), x.strides(), dim);
  const int64_t n = index.numel(), inner = xg.inner, rows = xg.outer * n;
  const T* px = static_cast<const T*>(x.storage()->data()) + x.offset();
  const int64_t* pi = index.data<int64_t>();
  T* po = out.data<T>();
  const int64_t run = xg.run;  // whole rows when the inner part is contiguous, else its dense runs
#pragma omp parallel for schedule(static) if (out.numel() >= kernels::kParallelGrain && !omp_in_parallel())
  for (int64_t r = 0; r < rows; ++r) {
    const T* xrow = px + xg.outer_offset(r / n) + pi[r % n] * xg.dim_stride;
    T* orow = po + r * inner;
    for (int64_t i = 0; i < inner; i += run) {
      const T* from = xrow + xg.inner_offset(i);
      std::copy(from, from + run, orow + i);
    }
  }
}

template <typename T>
void reference_index_select(const Tensor& out, const Tensor& x, int64_t dim, const Tensor& index) {
  detail::check_index_range("index_select", index, dim, x.shape());
  const T* px = static_cast<const T*>(x.storage()->data()) + x.offset();
  const int64_t* pi = index.data<int64_t>();
  T* po = out.data<T>();
  for (int64_t p = 0; p < out.numel(); ++p) {
    Shape c = detail::coordinates(p, out.shape());
    c[dim] = pi[c[dim]];
    po[p] = px[detail::offset_of(c, x.strides())];
  }
}

template <typename T>
void register_for() {
  register_kernel<kernels::IndexReadKernel>("index_select", DeviceType::cpu, dtype_of<T>(), index_select_kernel<T>,
                                            reference_index_select<T>);
}
}  // namespace

LOOM_KERNELS(cpu_index_select) {
  kernels::for_each_type(AllTypes{}, [](auto tag) { register_for<typename decltype(tag)::type>(); });
}

}  // namespace loom
