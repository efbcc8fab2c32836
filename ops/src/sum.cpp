// sum(x, dims, keepdim) = sum of x over dims     dx = g broadcast back to x's shape
#include "elementwise.h"
#include "loom/kernels/reduce.h"
#include "loom/kernels/span_sum.h"

namespace loom {

namespace {
// Floats accumulate in double: a long sum loses no precision to rounding.
// The fast paths keep short float partials (at most 16 values each) in vector
// registers and add them into the double accumulator in a fixed order.
template <typename T>
struct SumReducer {
  using Acc = std::conditional_t<std::is_floating_point_v<T>, double, int64_t>;
  Acc init() const { return 0; }
  void add(Acc& acc, T v) const { acc += v; }
  // Unit-stride runs (e.g. a sum over the contiguous last dim): kernels::span_sum's
  // 4 vector accumulators in blocks of 256; integers: several independent partial sums.
  void add_span(Acc& acc, const T* p, int64_t n) const {
    if constexpr (std::is_floating_point_v<T>) acc += kernels::span_sum(p, n);
    else kernels::add_span_lanes(*this, acc, p, n);
  }
  // A column sum: a block of up to kRowBlock rows summed per column in T, row by
  // row (8 vectors of columns in registers at a time), then added into acc in double.
  void add_rows(Acc* acc, const T* const* rows, int64_t nrows, int64_t width) const {
    int64_t c = 0;
    if constexpr (std::is_floating_point_v<T>) {
      using V = kernels::vec_t<T>;
      constexpr int64_t L = kernels::Vec<T>::lanes;
      const kernels::VecLoad load;
      for (; c + 8 * L <= width; c += 8 * L) {
        V a0{}, a1{}, a2{}, a3{}, a4{}, a5{}, a6{}, a7{};
        for (int64_t k = 0; k < nrows; ++k) {
          const T* p = rows[k] + c;
          a0 += load(p, 0), a1 += load(p, L), a2 += load(p, 2 * L), a3 += load(p, 3 * L);
          a4 += load(p, 4 * L), a5 += load(p, 5 * L), a6 += load(p, 6 * L), a7 += load(p, 7 * L);
        }
        const V parts[8] = {a0, a1, a2, a3, a4, a5, a6, a7};
        for (int64_t u = 0; u < 8; ++u)
          for (int64_t l = 0; l < L; ++l) acc[c + u * L + l] += parts[u][l];
      }
    }
    for (; c < width; ++c) {  // the same per-column order as the vector lanes (integers: exact in Acc)
      std::conditional_t<std::is_floating_point_v<T>, T, Acc> s = 0;
      for (int64_t k = 0; k < nrows; ++k) s += rows[k][c];
      acc[c] += s;
    }
  }
  void merge(Acc& acc, const Acc& other) const { acc += other; }
  T finish(const Acc& acc, int64_t) const { return static_cast<T>(acc); }
};
}  // namespace

Tensor sum(const Tensor& x, const Shape& dims, bool keepdim, Where where) {
  CallSite site(where);
  detail::require_cpu("sum", x);
  Shape reduce_dims = kernels::normalize_dims(dims, x.dim(), "sum");
  Tensor out = Tensor::empty(kernels::reduced_shape(x.shape(), reduce_dims, keepdim), {x.dtype(), x.device()});
  dispatch_numeric(x.dtype(), "sum", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (kernel_mode() == KernelMode::reference) kernels::reference_reduce<T, T>(out, x, reduce_dims, SumReducer<T>{});
    else kernels::reduce_loop<T, T>(out, x, reduce_dims, SumReducer<T>{});
  });
  Shape input_shape = x.shape();
  return record("sum", {x}, out, [input_shape, reduce_dims, keepdim](BackwardContext&, const Tensor& g) -> detail::Grads {
    Shape kept = kernels::reduced_shape(input_shape, reduce_dims, true);
    return {expand(keepdim ? g : reshape(g, kept), input_shape)};
  });
}

Tensor sum_to(const Tensor& x, const Shape& shape, Where where) {
  if (x.shape() == shape) return x;
  CallSite site(where);
  LOOM_CHECK(x.dim() >= static_cast<int64_t>(shape.size()), "sum_to: cannot reduce shape {} to {}", x.shape(), shape);
  size_t lead = x.dim() - shape.size();
  Shape dims;
  for (size_t d = 0; d < static_cast<size_t>(x.dim()); ++d) {
    if (d < lead) dims.push_back(static_cast<int64_t>(d));
    else if (shape[d - lead] == 1 && x.shape()[d] != 1) dims.push_back(static_cast<int64_t>(d));
    else LOOM_CHECK(shape[d - lead] == x.shape()[d], "sum_to: cannot reduce shape {} to {}", x.shape(), shape);
  }
  Tensor reduced = dims.empty() ? x : sum(x, dims, true);
  return reshape(reduced, shape);
}

Tensor mean(const Tensor& x, const Shape& dims, bool keepdim, Where where) {
  // Composite: sum / count. Its gradient comes from sum's and mul's.
  CallSite site(where);
  Shape reduce_dims = kernels::normalize_dims(dims, x.dim(), "mean");
  int64_t count = 1;
  for (int64_t d : reduce_dims) count *= x.shape()[d];
  LOOM_CHECK(is_floating(x.dtype()), "mean: expected a floating dtype, got {}", dtype_name(x.dtype()));
  return mul(sum(x, reduce_dims, keepdim), scalar_tensor(1.0 / static_cast<double>(count), {x.dtype(), x.device()}));
}

static OpCall sum_over(Shape dims, bool keepdim) {
  return [dims, keepdim](const OpArgs& x) { return sum(x[0], dims, keepdim); };
}

LOOM_OP(sum){
    .name = "sum",
    .call = [](const OpArgs& x) { return sum(x[0]); },
    .samples = {unary_sample({4, 7}, Domain::any, "all"),
                {{{{4, 7}}}, sum_over({1}, false), "dims={1}"},
                {{{{4, 7}}}, sum_over({0}, true), "dims={0} keepdim"},
                {{{{2, 3, 5}}}, sum_over({0, 2}, false), "dims={0,2}"},
                {{{{2, 3, 5}}}, sum_over({-1}, true), "dims={-1} keepdim"},
                // the fast paths' vector lanes, blocks and tails (rows of 70; a column sum of 20 rows)
                {{{{3, 70}}}, sum_over({1}, false), "[3,70] dims={1}"},
                {{{{20, 70}}}, sum_over({0}, false), "[20,70] dims={0}"}},
};

LOOM_OP(mean){
    .name = "mean",
    .call = [](const OpArgs& x) { return mean(x[0]); },
    .samples = {unary_sample({4, 7}, Domain::any, "all"),
                {{{{2, 3, 5}}}, [](const OpArgs& x) { return mean(x[0], {1}, true); }, "dims={1} keepdim"}},
};

LOOM_OP(sum_to){
    .name = "sum_to",
    .call = [](const OpArgs& x) { return sum_to(x[0], {3, 1}); },
    .samples = {unary_sample({2, 3, 4}, Domain::any, "[2,3,4]->[3,1]")},
};

}  // namespace loom
