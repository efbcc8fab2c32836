// CPU kernels of triu and tril (ops/src/triu.cpp): one pass over the rows, each
// row's kept columns one run, and the plain reference with a keep-predicate per
// element. Both ops share them, the triangle's side a template argument.
#include <omp.h>

#include <algorithm>

#include "loom/kernel_table.h"
#include "loom/kernels/loops.h"
#include "loom/ops/kernel_signatures.h"
#include "type_lists.h"

namespace loom {

namespace {
struct Triangle {
  bool upper;
  int64_t diagonal;
  bool keep(int64_t row, int64_t col) const { return upper ? col - row >= diagonal : col - row <= diagonal; }
};

template <typename T>
void triangle_kernel(const Tensor& out, const Tensor& x, Triangle tri) {
  const int64_t nd = x.dim(), rows = x.shape()[nd - 2], cols = x.shape()[nd - 1];
  const int64_t srow = x.strides()[nd - 2], scol = x.strides()[nd - 1];
  Shape batch_sizes(x.shape().begin(), x.shape().end() - 2), batch_strides(x.strides().begin(), x.strides().end() - 2);
  const int64_t lines = shape_numel(batch_sizes) * rows;
  const T* px = static_cast<const T*>(x.storage()->data()) + x.offset();
  T* po = out.data<T>();
#pragma omp parallel for schedule(static) if (out.numel() >= kernels::kParallelGrain && !omp_in_parallel())
  for (int64_t line = 0; line < lines; ++line) {
    int64_t i = line % rows;
    const T* xrow = px + strided_offset(line / rows, batch_sizes, batch_strides) + i * srow;
    T* orow = po + line * cols;
    // The kept columns of row i form one run: [i + k, cols) for triu, [0, i + k + 1) for tril.
    int64_t lo = tri.upper ? std::clamp<int64_t>(i + tri.diagonal, 0, cols) : 0;
    int64_t hi = tri.upper ? cols : std::clamp<int64_t>(i + tri.diagonal + 1, 0, cols);
    for (int64_t j = 0; j < lo; ++j) orow[j] = T(0);
    for (int64_t j = lo; j < hi; ++j) orow[j] = xrow[j * scol];
    for (int64_t j = hi; j < cols; ++j) orow[j] = T(0);
  }
}

template <typename T>
void reference_triangle(const Tensor& out, const Tensor& x, Triangle tri) {
  const int64_t nd = x.dim(), rows = x.shape()[nd - 2], cols = x.shape()[nd - 1];
  const T* px = static_cast<const T*>(x.storage()->data()) + x.offset();
  T* po = out.data<T>();
  for (int64_t p = 0; p < out.numel(); ++p) {
    int64_t col = p % cols, row = (p / cols) % rows;
    po[p] = tri.keep(row, col) ? px[strided_offset(p, x.shape(), x.strides())] : T(0);
  }
}

template <bool Upper, typename T>
void triangle_fast(const Tensor& out, const Tensor& x, int64_t diagonal) {
  triangle_kernel<T>(out, x, {Upper, diagonal});
}
template <bool Upper, typename T>
void triangle_reference(const Tensor& out, const Tensor& x, int64_t diagonal) {
  reference_triangle<T>(out, x, {Upper, diagonal});
}

template <typename T>
void register_for() {
  register_kernel<kernels::TriangleKernel>("triu", DeviceType::cpu, dtype_of<T>(), triangle_fast<true, T>,
                                           triangle_reference<true, T>);
  register_kernel<kernels::TriangleKernel>("tril", DeviceType::cpu, dtype_of<T>(), triangle_fast<false, T>,
                                           triangle_reference<false, T>);
}
}  // namespace

LOOM_KERNELS(cpu_triu) {
  kernels::for_each_type(AllTypes{}, [](auto tag) { register_for<typename decltype(tag)::type>(); });
}

}  // namespace loom
