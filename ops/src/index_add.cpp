// index_add(self, dim, index, source): a copy of self with source's slices added
// at `index` (1-D, int64) along dim; repeated indices accumulate.
//   out[o][index[j]][i] += source[o][j][i]
//   dself = g            dsource = index_select(g, dim, index)
// index_select's gradient. Deterministic: a thread owns whole output columns
// and adds into each in index order (no atomics).
#include "indexing.h"

namespace loom {

namespace {
template <typename T>
void index_add_kernel(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& source) {
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
  const int64_t* pi = index.data<int64_t>();
  const T* ps = source.data<T>();
  T* po = out.data<T>();
  for (int64_t p = 0; p < source.numel(); ++p) {
    Shape c = detail::coordinates(p, source.shape());
    c[dim] = pi[c[dim]];
    po[detail::offset_of(c, out.strides())] += ps[p];
  }
}
}  // namespace

Tensor index_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source, Where where) {
  CallSite site(where);
  detail::check_same_kind("index_add", self, source);
  detail::require_cpu("index_add", self);
  LOOM_CHECK(self.dim() >= 1, "index_add: self must have at least 1 dim, got shape {}", self.shape());
  dim = wrap_dim(dim, self.dim(), "index_add");
  LOOM_CHECK(index.dim() <= 1, "index_add: index must be 1-D, got shape {}", index.shape());
  Tensor idx = detail::index_values("index_add", index);
  Shape want = detail::with_dim(self.shape(), dim, idx.numel());
  LOOM_CHECK(source.shape() == want, "index_add: source of shape {} does not match self of shape {} with {} indices in dim {} (expected {})",
             source.shape(), self.shape(), idx.numel(), dim, want);
  detail::check_index_range("index_add", idx, self.shape()[dim], dim, self.shape());
  Tensor out = Tensor::empty(self.shape(), {self.dtype(), self.device()});
  {
    NoGradGuard kernel_internals;
    copy_(out, self);
    Tensor src = contiguous(source);
    dispatch_numeric(self.dtype(), "index_add", [&](auto tag) {
      using T = typename decltype(tag)::type;
      if (kernel_mode() == KernelMode::reference) reference_index_add<T>(out, dim, idx, src);
      else index_add_kernel<T>(out, dim, idx, src);
    });
  }
  return record("index_add", {self, source}, out, [dim, idx](BackwardContext& c, const Tensor& g) -> detail::Grads {
    return {c.needs(0) ? g : Tensor(), c.needs(1) ? index_select(g, dim, idx) : Tensor()};
  });
}

LOOM_OP(index_add){
    .name = "index_add",
    .call = [](const OpArgs& x) { return index_add(x[0], 0, x[1], x[2]); },
    .samples = {{{{{4, 5}}, {{6}, Domain::any, DType::i64, 4}, {{6, 5}}}, {}, "dim=0, repeated indices"},
                {{{{3, 5}}, {{2}, Domain::any, DType::i64, 5}, {{3, 2}}},
                 [](const OpArgs& x) { return index_add(x[0], 1, x[1], x[2]); }, "dim=1"},
                {{{{2, 4, 3}}, {{5}, Domain::any, DType::i64, 4}, {{2, 5, 3}}},
                 [](const OpArgs& x) { return index_add(x[0], -2, x[1], x[2]); }, "3-D dim=-2"}},
};

}  // namespace loom
