// triu(x, k): x where column - row >= k in the last two dims, 0 elsewhere.
// tril(x, k): x where column - row <= k, 0 elsewhere.
//   dx = triu(g, k) (resp. tril(g, k)): the mask is constant, so the op is linear.
// Both share one kernel (a keep-predicate per (row, column)), so they live together.
// causal_mask(n): bool [n, n], true where column > row: the positions a decoder masks.
#include "elementwise.h"

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

Tensor triangle(std::string_view op, const Tensor& x, Triangle tri) {
  detail::require_cpu(op, x);
  LOOM_CHECK(x.dim() >= 2, "{}: expected at least 2 dims, got shape {}", op, x.shape());
  Tensor out = Tensor::empty(x.shape(), {x.dtype(), x.device()});
  dispatch_all(x.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (kernel_mode() == KernelMode::reference) reference_triangle<T>(out, x, tri);
    else triangle_kernel<T>(out, x, tri);
  });
  return out;
}
}  // namespace

Tensor triu(const Tensor& x, int64_t diagonal, Where where) {
  CallSite site(where);
  Tensor out = triangle("triu", x, {true, diagonal});
  return record("triu", {x}, out, [diagonal](BackwardContext&, const Tensor& g) -> detail::Grads {
    return {triu(g, diagonal)};
  });
}

Tensor tril(const Tensor& x, int64_t diagonal, Where where) {
  CallSite site(where);
  Tensor out = triangle("tril", x, {false, diagonal});
  return record("tril", {x}, out, [diagonal](BackwardContext&, const Tensor& g) -> detail::Grads {
    return {tril(g, diagonal)};
  });
}

Tensor causal_mask(int64_t n, Device device) {
  LOOM_CHECK(n >= 0, "causal_mask: size must be non-negative, got {}", n);
  Tensor mask = Tensor::empty({n, n}, {DType::b8});
  bool* p = mask.data<bool>();
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) p[i * n + j] = j > i;
  return device == mask.device() ? mask : transfer(mask, device);
}

LOOM_OP(triu){
    .name = "triu",
    .call = [](const OpArgs& x) { return triu(x[0]); },
    .samples = {unary_sample({4, 5}, Domain::any, "k=0"),
                {{{{2, 4, 4}}}, [](const OpArgs& x) { return triu(x[0], 1); }, "batched k=1"},
                {{{{5, 3}}}, [](const OpArgs& x) { return triu(x[0], -2); }, "k=-2"}},
};

LOOM_OP(tril){
    .name = "tril",
    .call = [](const OpArgs& x) { return tril(x[0]); },
    .samples = {unary_sample({4, 5}, Domain::any, "k=0"),
                {{{{2, 4, 4}}}, [](const OpArgs& x) { return tril(x[0], -1); }, "batched k=-1"},
                {{{{3, 5}}}, [](const OpArgs& x) { return tril(x[0], 2); }, "k=2"}},
};

}  // namespace loom
