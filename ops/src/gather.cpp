// gather(x, dim, index): out has index's shape and, for dim = 1,
//   out[i][j][k] = x[i][index[i][j][k]][k]
// index has x's number of dims, with index.size(d) <= x.size(d) for d != dim.
//   dx = scatter_add(zeros(x.shape), dim, index, g)   (repeated indices accumulate)
#include "indexing.h"

namespace loom {

namespace {
void check_gather_shapes(std::string_view op, const Tensor& x, int64_t dim, const Tensor& index) {
  LOOM_CHECK(index.dim() == x.dim(), "{}: index of shape {} must have as many dims as the input of shape {}", op,
             index.shape(), x.shape());
  for (int64_t d = 0; d < x.dim(); ++d)
    LOOM_CHECK(d == dim || index.shape()[d] <= x.shape()[d],
               "{}: index of shape {} is larger than the input of shape {} in dim {}", op, index.shape(), x.shape(), d);
}

template <typename T>
void gather_kernel(const Tensor& out, const Tensor& x, int64_t dim, const Tensor& index) {
  const Shape& ishape = index.shape();
  // x read as the box of index's shape (the indexed dim spans all of x's).
  detail::DimGeometry xg = detail::dim_geometry(detail::with_dim(ishape, dim, x.shape()[dim]), x.strides(), dim);
  const int64_t n = ishape[dim], inner = xg.inner, rows = xg.outer * n;
  const T* px = static_cast<const T*>(x.storage()->data()) + x.offset();
  const int64_t* pi = index.data<int64_t>();
  T* po = out.data<T>();
#pragma omp parallel for schedule(static) if (out.numel() >= kernels::kParallelGrain && !omp_in_parallel())
  for (int64_t r = 0; r < rows; ++r) {
    const T* xrow = px + xg.outer_offset(r / n);
    const int64_t* irow = pi + r * inner;
    T* orow = po + r * inner;
    for (int64_t i = 0; i < inner; ++i) orow[i] = xrow[irow[i] * xg.dim_stride + xg.inner_offsets[i]];
  }
}

template <typename T>
void reference_gather(const Tensor& out, const Tensor& x, int64_t dim, const Tensor& index) {
  const T* px = static_cast<const T*>(x.storage()->data()) + x.offset();
  const int64_t* pi = index.data<int64_t>();
  T* po = out.data<T>();
  for (int64_t p = 0; p < out.numel(); ++p) {
    Shape c = detail::coordinates(p, index.shape());
    c[dim] = pi[p];
    po[p] = px[detail::offset_of(c, x.strides())];
  }
}
}  // namespace

Tensor gather(const Tensor& x, int64_t dim, const Tensor& index, Where where) {
  CallSite site(where);
  detail::require_cpu("gather", x);
  LOOM_CHECK(x.dim() >= 1, "gather: input must have at least 1 dim, got shape {}", x.shape());
  dim = wrap_dim(dim, x.dim(), "gather");
  Tensor idx = detail::index_values("gather", index);
  check_gather_shapes("gather", x, dim, idx);
  detail::check_index_range("gather", idx, x.shape()[dim], dim, x.shape());
  Tensor out = Tensor::empty(idx.shape(), {x.dtype(), x.device()});
  dispatch_all(x.dtype(), "gather", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (kernel_mode() == KernelMode::reference) reference_gather<T>(out, x, dim, idx);
    else gather_kernel<T>(out, x, dim, idx);
  });
  Shape input_shape = x.shape();
  return record("gather", {x}, out, [input_shape, dim, idx](BackwardContext&, const Tensor& g) -> detail::Grads {
    return {scatter_add(zeros(input_shape, {g.dtype(), g.device()}), dim, idx, g)};
  });
}

LOOM_OP(gather){
    .name = "gather",
    .call = [](const OpArgs& x) { return gather(x[0], 0, x[1]); },
    .samples = {{{{{4, 5}}, {{3, 5}, Domain::any, DType::i64, 4}}, {}, "dim=0"},
                {{{{3, 5}}, {{3, 7}, Domain::any, DType::i64, 5}}, [](const OpArgs& x) { return gather(x[0], 1, x[1]); },
                 "dim=1, index wider than x"},
                {{{{4, 5}}, {{2, 3}, Domain::any, DType::i64, 5}}, [](const OpArgs& x) { return gather(x[0], -1, x[1]); },
                 "dim=-1, index smaller"},
                {{{{2, 3, 4}}, {{2, 5, 4}, Domain::any, DType::i64, 3}},
                 [](const OpArgs& x) { return gather(x[0], 1, x[1]); }, "3-D dim=1"}},
};

}  // namespace loom
