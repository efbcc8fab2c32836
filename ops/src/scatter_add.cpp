// scatter_add(self, dim, index, src): a copy of self with src added at index along
// dim; for dim = 1:   out[i][index[i][j][k]][k] += src[i][j][k]
// src has index's shape; index.size(d) <= self.size(d) for d != dim.
//   dself = g            dsrc = gather(g, dim, index)
// gather's gradient. Deterministic: a thread owns whole output columns (every
// position except along dim) and adds into each in index order, no atomics.
#include "indexing.h"

namespace loom {

namespace {
template <typename T>
void scatter_add_kernel(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src) {
  const Shape& ishape = index.shape();
  // out (contiguous) written through the box of index's shape.
  detail::DimGeometry og = detail::dim_geometry(detail::with_dim(ishape, dim, out.shape()[dim]), out.strides(), dim);
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
      for (int64_t i = c0; i < c1; ++i) obase[irow[i] * og.dim_stride + og.inner_offsets[i]] += srow[i];
    }
  }
}

// Every src element in row-major order: per output element, the same order as above.
template <typename T>
void reference_scatter_add(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src) {
  const int64_t* pi = index.data<int64_t>();
  const T* ps = src.data<T>();
  T* po = out.data<T>();
  for (int64_t p = 0; p < index.numel(); ++p) {
    Shape c = detail::coordinates(p, index.shape());
    c[dim] = pi[p];
    po[detail::offset_of(c, out.strides())] += ps[p];
  }
}
}  // namespace

Tensor scatter_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src, Where where) {
  CallSite site(where);
  detail::check_same_kind("scatter_add", self, src);
  detail::require_cpu("scatter_add", self);
  LOOM_CHECK(self.dim() >= 1, "scatter_add: self must have at least 1 dim, got shape {}", self.shape());
  dim = wrap_dim(dim, self.dim(), "scatter_add");
  Tensor idx = detail::index_values("scatter_add", index);
  LOOM_CHECK(src.shape() == idx.shape(), "scatter_add: src of shape {} must have the index's shape {}", src.shape(),
             idx.shape());
  LOOM_CHECK(idx.dim() == self.dim(), "scatter_add: index of shape {} must have as many dims as self of shape {}",
             idx.shape(), self.shape());
  for (int64_t d = 0; d < self.dim(); ++d)
    LOOM_CHECK(d == dim || idx.shape()[d] <= self.shape()[d],
               "scatter_add: index of shape {} is larger than self of shape {} in dim {}", idx.shape(), self.shape(), d);
  detail::check_index_range("scatter_add", idx, self.shape()[dim], dim, self.shape());
  Tensor out = Tensor::empty(self.shape(), {self.dtype(), self.device()});
  {
    NoGradGuard kernel_internals;
    copy_(out, self);
    Tensor source = contiguous(src);
    dispatch_numeric(self.dtype(), "scatter_add", [&](auto tag) {
      using T = typename decltype(tag)::type;
      if (kernel_mode() == KernelMode::reference) reference_scatter_add<T>(out, dim, idx, source);
      else scatter_add_kernel<T>(out, dim, idx, source);
    });
  }
  return record("scatter_add", {self, src}, out, [dim, idx](BackwardContext& c, const Tensor& g) -> detail::Grads {
    return {c.needs(0) ? g : Tensor(), c.needs(1) ? gather(g, dim, idx) : Tensor()};
  });
}

LOOM_OP(scatter_add){
    .name = "scatter_add",
    .call = [](const OpArgs& x) { return scatter_add(x[0], 0, x[1], x[2]); },
    .samples = {{{{{4, 5}}, {{6, 5}, Domain::any, DType::i64, 4}, {{6, 5}}}, {}, "dim=0, repeated indices"},
                {{{{3, 5}}, {{2, 4}, Domain::any, DType::i64, 5}, {{2, 4}}},
                 [](const OpArgs& x) { return scatter_add(x[0], -1, x[1], x[2]); }, "dim=-1, index smaller"},
                {{{{2, 3, 4}}, {{2, 5, 4}, Domain::any, DType::i64, 3}, {{2, 5, 4}}},
                 [](const OpArgs& x) { return scatter_add(x[0], 1, x[1], x[2]); }, "3-D dim=1"}},
};

}  // namespace loom
