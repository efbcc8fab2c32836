// CPU kernels of embedding and embedding_backward (ops/src/embedding.cpp), each
// fast kernel beside its plain reference. The backward's fast kernel sorts token
// positions by id (a stable counting sort) and each vocabulary row sums its
// tokens in their original order, one thread per row: the same bits for any
// thread count, and no atomics. Each row of the [V, D] result is written once
// (zeroed, or its first token's row then the others added): no separate zero
// fill of the whole table first.
#include <algorithm>
#include <cstring>
#include <string_view>
#include <vector>

#include "loom/kernel_table.h"
#include "loom/kernels/loops.h"
#include "loom/ops/kernel_signatures.h"
#include "type_lists.h"

namespace loom {

namespace {

// Every id in [0, vocab): checked before any parallel loop (which cannot throw).
void check_ids(std::string_view op, const Tensor& ids, int64_t vocab) {
  const int64_t* p = ids.data<int64_t>();
  for (int64_t i = 0; i < ids.numel(); ++i)
    LOOM_CHECK(p[i] >= 0 && p[i] < vocab, "{}: id {} is out of range for a vocabulary of {}", op, p[i], vocab);
}

template <typename T>
void lookup_kernel(const Tensor& out, const Tensor& weight, const Tensor& ids) {
  check_ids("embedding", ids, weight.shape()[0]);
  const int64_t n = ids.numel(), dim = weight.shape()[1];
  const int64_t srow = weight.strides()[0], scol = weight.strides()[1];
  const T* pw = static_cast<const T*>(weight.storage()->data()) + weight.offset();
  const int64_t* pi = ids.data<int64_t>();
  T* po = out.data<T>();
#pragma omp parallel for schedule(static) if (out.numel() >= kernels::kParallelGrain && !omp_in_parallel())
  for (int64_t t = 0; t < n; ++t) {
    const T* row = pw + pi[t] * srow;
    if (scol == 1)
      std::memcpy(po + t * dim, row, dim * sizeof(T));
    else
      for (int64_t d = 0; d < dim; ++d) po[t * dim + d] = row[d * scol];
  }
}

template <typename T>
void reference_lookup(const Tensor& out, const Tensor& weight, const Tensor& ids) {
  check_ids("embedding", ids, weight.shape()[0]);
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
  check_ids("embedding_backward", ids, vocab);
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

// The plain reference: a zeroed table, then tokens in order, each row added into its id's row.
template <typename T>
void reference_scatter_rows(const Tensor& out, const Tensor& grad, const Tensor& ids, int64_t padding_idx) {
  const int64_t dim = out.shape()[1];
  check_ids("embedding_backward", ids, out.shape()[0]);
  const int64_t* pi = ids.data<int64_t>();
  const T* pg = grad.data<T>();
  T* po = out.data<T>();
  std::fill(po, po + out.numel(), T(0));
  for (int64_t t = 0; t < ids.numel(); ++t)
    if (pi[t] != padding_idx)
      for (int64_t d = 0; d < dim; ++d) po[pi[t] * dim + d] += pg[t * dim + d];
}

template <typename T>
void register_for() {
  register_kernel<kernels::EmbeddingKernel>("embedding", DeviceType::cpu, dtype_of<T>(), lookup_kernel<T>,
                                            reference_lookup<T>);
  if constexpr (!std::is_same_v<T, bool>)
    register_kernel<kernels::EmbeddingBackwardKernel>("embedding_backward", DeviceType::cpu, dtype_of<T>(),
                                                      scatter_rows_kernel<T>, reference_scatter_rows<T>);
}

}  // namespace

LOOM_KERNELS(cpu_embedding) {
  kernels::for_each_type(AllTypes{}, [](auto tag) { register_for<typename decltype(tag)::type>(); });
}

}  // namespace loom
