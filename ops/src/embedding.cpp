// embedding(weight [V, D], ids [...] int64, padding_idx): out[..., :] = weight[id, :]
//   dweight = embedding_backward(g, ids, V, padding_idx): row v gets the sum of g's
//   rows whose id is v; row padding_idx gets nothing (that row is a fixed pad vector).
// embedding_backward is linear in g; its own gradient is the lookup again,
//   dg = embedding(gg, ids) with positions whose id is padding_idx set to 0,
// so double backward works through the pair.
// Determinism: the backward sorts token positions by id (a stable counting sort)
// and each vocabulary row sums its tokens in their original order, one thread per
// row: the same bits for any thread count, and no atomics. Each row of the [V, D]
// result is written once (zeroed, or its first token's row then the others added):
// no separate zero fill of the whole table first.
#include <cstring>

#include "indexing.h"

namespace loom {

namespace {

void check_ids(std::string_view op, const Tensor& ids, int64_t vocab, int64_t padding_idx) {
  LOOM_CHECK(padding_idx >= -1 && padding_idx < vocab,
             "{}: padding_idx {} is out of range for a vocabulary of {} (-1 means none)", op, padding_idx, vocab);
  const int64_t* p = ids.data<int64_t>();
  for (int64_t i = 0; i < ids.numel(); ++i)
    LOOM_CHECK(p[i] >= 0 && p[i] < vocab, "{}: id {} is out of range for a vocabulary of {}", op, p[i], vocab);
}

template <typename T>
void lookup_kernel(const Tensor& out, const Tensor& weight, const Tensor& ids) {
  const int64_t n = ids.numel(), dim = weight.shape()[1];
  const int64_t srow = weight.strides()[0], scol = weight.strides()[1];
  const T* pw = static_cast<const T*>(weight.storage()->data()) + weight.offset();
  const int64_t* pi = ids.data<int64_t>();
  T* po = out.data<T>();
#pragma omp parallel for schedule(static) if (out.numel() >= kernels::kParallelGrain && !omp_in_parallel())
  for (int64_t t = 0; t < n; ++t) {
    const T* row = pw + pi[t] * srow;
    if (scol == 1) std::memcpy(po + t * dim, row, dim * sizeof(T));
    else for (int64_t d = 0; d < dim; ++d) po[t * dim + d] = row[d * scol];
  }
}

template <typename T>
void reference_lookup(const Tensor& out, const Tensor& weight, const Tensor& ids) {
  const int64_t dim = weight.shape()[1];
  const T* pw = static_cast<const T*>(weight.storage()->data()) + weight.offset();
  const int64_t* pi = ids.data<int64_t>();
  T* po = out.data<T>();
  for (int64_t t = 0; t < ids.numel(); ++t)
    for (int64_t d = 0; d < dim; ++d) po[t * dim + d] = pw[pi[t] * weight.strides()[0] + d * weight.strides()[1]];
}

// out [V, D] (uninitialized: every row is written exactly once here), grad read as
// [N, D] contiguous. A row with no tokens (or the padding row) is zeroed; otherwise
// it starts as a copy of its first token's gradient row and adds the others in
// token order. One thread owns a row, so no atomics and no thread-count dependence.
template <typename T>
void scatter_rows_kernel(const Tensor& out, const Tensor& grad, const Tensor& ids, int64_t padding_idx) {
  const int64_t n = ids.numel(), vocab = out.shape()[0], dim = out.shape()[1];
  const int64_t* pi = ids.data<int64_t>();
  // Counting sort: first[v] .. first[v + 1] index `order`, the positions with id v, ascending.
  std::vector<int64_t> first(vocab + 1, 0), order(n);
  for (int64_t t = 0; t < n; ++t) ++first[pi[t] + 1];
  for (int64_t v = 0; v < vocab; ++v) first[v + 1] += first[v];
  std::vector<int64_t> next(first.begin(), first.end() - 1);
  for (int64_t t = 0; t < n; ++t) order[next[pi[t]]++] = t;
  const T* pg = grad.data<T>();
  T* po = out.data<T>();
#pragma omp parallel for schedule(static) if (vocab * dim >= kernels::kParallelGrain && !omp_in_parallel())
  for (int64_t v = 0; v < vocab; ++v) {
    T* row = po + v * dim;
    const int64_t k0 = first[v], k1 = first[v + 1];
    if (v == padding_idx || k0 == k1) {
      std::memset(static_cast<void*>(row), 0, dim * sizeof(T));  // all-zero bits: 0 for every numeric T
      continue;
    }
    std::memcpy(row, pg + order[k0] * dim, dim * sizeof(T));
    for (int64_t k = k0 + 1; k < k1; ++k) {
      const T* g = pg + order[k] * dim;
#pragma omp simd
      for (int64_t d = 0; d < dim; ++d) row[d] += g[d];
    }
  }
}

// The plain reference: tokens in order, each row added into its id's row.
template <typename T>
void reference_scatter_rows(const Tensor& out, const Tensor& grad, const Tensor& ids, int64_t padding_idx) {
  const int64_t dim = out.shape()[1];
  const int64_t* pi = ids.data<int64_t>();
  const T* pg = grad.data<T>();
  T* po = out.data<T>();
  for (int64_t t = 0; t < ids.numel(); ++t)
    if (pi[t] != padding_idx)
      for (int64_t d = 0; d < dim; ++d) po[pi[t] * dim + d] += pg[t * dim + d];
}
}  // namespace

Tensor embedding(const Tensor& weight, const Tensor& ids, int64_t padding_idx, Where where) {
  CallSite site(where);
  detail::require_cpu("embedding", weight);
  LOOM_CHECK(weight.dim() == 2, "embedding: weight must be [vocabulary, dim], got shape {}", weight.shape());
  LOOM_CHECK(ids.dtype() == DType::i64, "embedding: ids must be int64, got {}", dtype_name(ids.dtype()));
  LOOM_CHECK(ids.device() == weight.device(), "embedding: weight is on {} and ids on {}", weight.device(),
             ids.device());
  Tensor idx = detail::index_values("embedding", ids);
  const int64_t vocab = weight.shape()[0];
  check_ids("embedding", idx, vocab, padding_idx);
  Shape out_shape = ids.shape();
  out_shape.push_back(weight.shape()[1]);
  Tensor out = Tensor::empty(out_shape, {weight.dtype(), weight.device()});
  dispatch_all(weight.dtype(), "embedding", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (kernel_mode() == KernelMode::reference) reference_lookup<T>(out, weight, idx);
    else lookup_kernel<T>(out, weight, idx);
  });
  return record("embedding", {weight}, out, [idx, vocab, padding_idx](BackwardContext&, const Tensor& g) -> detail::Grads {
    return {embedding_backward(g, idx, vocab, padding_idx)};
  });
}

Tensor embedding_backward(const Tensor& grad, const Tensor& ids, int64_t vocab_size, int64_t padding_idx, Where where) {
  CallSite site(where);
  detail::require_cpu("embedding_backward", grad);
  LOOM_CHECK(ids.dtype() == DType::i64, "embedding_backward: ids must be int64, got {}", dtype_name(ids.dtype()));
  LOOM_CHECK(grad.dim() == ids.dim() + 1 && Shape(grad.shape().begin(), grad.shape().end() - 1) == ids.shape(),
             "embedding_backward: grad of shape {} must be the ids' shape {} plus one dim", grad.shape(), ids.shape());
  Tensor idx = detail::index_values("embedding_backward", ids);
  check_ids("embedding_backward", idx, vocab_size, padding_idx);
  const int64_t dim = grad.shape().back();
  Tensor out;
  {
    NoGradGuard kernel_internals;
    Tensor g = contiguous(grad);
    dispatch_numeric(grad.dtype(), "embedding_backward", [&](auto tag) {
      using T = typename decltype(tag)::type;
      if (kernel_mode() == KernelMode::reference) {
        out = zeros({vocab_size, dim}, {grad.dtype(), grad.device()});
        reference_scatter_rows<T>(out, g, idx, padding_idx);
      } else {
        out = Tensor::empty({vocab_size, dim}, {grad.dtype(), grad.device()});  // the kernel writes every row
        scatter_rows_kernel<T>(out, g, idx, padding_idx);
      }
    });
  }
  return record("embedding_backward", {grad}, out, [idx, padding_idx](BackwardContext&, const Tensor& gg) -> detail::Grads {
    Tensor rows = embedding(gg, idx, padding_idx);
    if (padding_idx < 0) return {rows};
    // Positions holding the padding id took no part in the forward: their gradient is 0.
    Tensor keep;
    {
      NoGradGuard constant;
      Tensor pad = full(idx.shape(), static_cast<double>(padding_idx), {DType::i64, idx.device()});
      keep = to_dtype(unsqueeze(ne(idx, pad), -1), gg.dtype());
    }
    return {mul(rows, keep)};
  });
}

// The padding sample holds row 1 at zero, as a model does: its true gradient is
// then 0, the same as what the padding rule reports (the rule itself is checked
// against a hand count in tests/test_shape_ops.cpp and by embedding_backward's rows).
LOOM_OP(embedding){
    .name = "embedding",
    .call = [](const OpArgs& x) { return embedding(x[0], x[1]); },
    .samples = {{{{{10, 4}}, {{2, 3}, Domain::any, DType::i64, 10}}, {}, "V=10 D=4, ids [2,3]"},
                {{{{3, 5}}, {{8}, Domain::any, DType::i64, 3}}, {}, "V=3 D=5, ids [8] (repeats)"},
                {{{{4, 3}}, {{3, 4}, Domain::any, DType::i64, 4}},
                 [](const OpArgs& x) {
                   Tensor row_mask = to_dtype(from_vector<double>({1, 0, 1, 1}, {4, 1}, {DType::f64, x[0].device()}), x[0].dtype());
                   return embedding(x[0] * row_mask, x[1], 1);
                 },
                 "padding_idx=1, row held at 0"}},
};

LOOM_OP(embedding_backward){
    .name = "embedding_backward",
    .call = [](const OpArgs& x) { return embedding_backward(x[0], x[1], 6); },
    .samples = {{{{{2, 3, 4}}, {{2, 3}, Domain::any, DType::i64, 6}}, {}, "V=6 D=4, ids [2,3]"},
                {{{{10, 3}}, {{10}, Domain::any, DType::i64, 4}},
                 [](const OpArgs& x) { return embedding_backward(x[0], x[1], 4, 3); }, "V=4 padding_idx=3, repeats"}},
};

}  // namespace loom
