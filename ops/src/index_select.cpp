// index_select(x, dim, index): the slices of x at `index` (1-D, int64) along dim;
// out.shape = x.shape with dim replaced by index.numel().
//   out[o][j][i] = x[o][index[j]][i]        dx = index_add(zeros(x.shape), dim, index, g)
#include "indexing.h"

namespace loom {

namespace {
template <typename T>
void index_select_kernel(const Tensor& out, const Tensor& x, int64_t dim, const Tensor& index) {
  detail::DimGeometry xg = detail::dim_geometry(x.shape(), x.strides(), dim);
  const int64_t n = index.numel(), inner = xg.inner, rows = xg.outer * n;
  const T* px = static_cast<const T*>(x.storage()->data()) + x.offset();
  const int64_t* pi = index.data<int64_t>();
  T* po = out.data<T>();
  bool unit_inner = true;  // inner offsets 0, 1, 2, ...: copy whole rows
  for (int64_t i = 0; i < inner; ++i) unit_inner = unit_inner && xg.inner_offsets[i] == i;
#pragma omp parallel for schedule(static) if (out.numel() >= kernels::kParallelGrain && !omp_in_parallel())
  for (int64_t r = 0; r < rows; ++r) {
    const T* xrow = px + xg.outer_offset(r / n) + pi[r % n] * xg.dim_stride;
    T* orow = po + r * inner;
    if (unit_inner) std::copy(xrow, xrow + inner, orow);
    else for (int64_t i = 0; i < inner; ++i) orow[i] = xrow[xg.inner_offsets[i]];
  }
}

template <typename T>
void reference_index_select(const Tensor& out, const Tensor& x, int64_t dim, const Tensor& index) {
  const T* px = static_cast<const T*>(x.storage()->data()) + x.offset();
  const int64_t* pi = index.data<int64_t>();
  T* po = out.data<T>();
  for (int64_t p = 0; p < out.numel(); ++p) {
    Shape c = detail::coordinates(p, out.shape());
    c[dim] = pi[c[dim]];
    po[p] = px[detail::offset_of(c, x.strides())];
  }
}
}  // namespace

Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index, Where where) {
  CallSite site(where);
  detail::require_cpu("index_select", x);
  LOOM_CHECK(x.dim() >= 1, "index_select: input must have at least 1 dim, got shape {}", x.shape());
  dim = wrap_dim(dim, x.dim(), "index_select");
  LOOM_CHECK(index.dim() <= 1, "index_select: index must be 1-D, got shape {}", index.shape());
  Tensor idx = detail::index_values("index_select", index);
  detail::check_index_range("index_select", idx, x.shape()[dim], dim, x.shape());
  Tensor out = Tensor::empty(detail::with_dim(x.shape(), dim, idx.numel()), {x.dtype(), x.device()});
  dispatch_all(x.dtype(), "index_select", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (kernel_mode() == KernelMode::reference) reference_index_select<T>(out, x, dim, idx);
    else index_select_kernel<T>(out, x, dim, idx);
  });
  Shape input_shape = x.shape();
  return record("index_select", {x}, out, [input_shape, dim, idx](BackwardContext&, const Tensor& g) -> detail::Grads {
    return {index_add(zeros(input_shape, {g.dtype(), g.device()}), dim, idx, g)};
  });
}

LOOM_OP(index_select){
    .name = "index_select",
    .call = [](const OpArgs& x) { return index_select(x[0], 0, x[1]); },
    .samples = {{{{{4, 5}}, {{6}, Domain::any, DType::i64, 4}}, {}, "dim=0, repeated indices"},
                {{{{3, 5}}, {{4}, Domain::any, DType::i64, 5}},
                 [](const OpArgs& x) { return index_select(x[0], 1, x[1]); }, "dim=1"},
                {{{{2, 5, 3}}, {{3}, Domain::any, DType::i64, 5}},
                 [](const OpArgs& x) { return index_select(x[0], -2, x[1]); }, "3-D dim=-2"}},
};

}  // namespace loom
