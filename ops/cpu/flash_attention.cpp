// CPU kernels of flash_attention and its backward (ops/src/flash_attention.cpp).
// Fast: FlashAttention-2's algorithm, chunks of kRowChunk query rows split among the
// threads: the keys in blocks of kKeyBlock (transposed, so a row's scores run along the
// keys, vectorized), an online softmax (a running max and sum per row; the output row
// rescaled when the max grows), nothing of size [Tq, Tk] stored. The backward
// recomputes each weight from the saved log-sum-exp: dq by chunks of query rows, then
// dk and dv by blocks of keys: every output element is summed by one task in one order
// (no atomic adds), so the bits do not depend on the thread count.
// Reference: each row's scores whole, then its softmax and sums, on one thread.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "loom/kernel_table.h"
#include "loom/ops/kernel_signatures.h"
#include "loom/philox.h"
#include "row_loops.h"
#include "type_lists.h"

namespace loom {

namespace {

constexpr int64_t kKeyBlock = 64;
// Below this many multiply-adds a call stays on one thread.
constexpr int64_t kParallelWork = 1 << 16;

// One call's operands as pointers and sizes, and what weight (b, i, j) reads: its score,
// its mask term and its dropout factor.
template <typename T>
struct Attention {
  const T *q, *k, *v;
  int64_t batches, queries, keys, depth, value_depth;
  T scale;
  // The mask: element (b, i, j) at mask_base[b] + i * mask_row + j * mask_col.
  const void* mask = nullptr;
  bool additive = false;
  std::vector<int64_t> mask_base;
  int64_t mask_row = 0, mask_col = 0;
  // Dropout: keep iff the element's Philox word >> 8 >= threshold, then scaled.
  bool dropout = false;
  uint32_t threshold = 0;
  T keep_scale = 1;
  uint64_t seed = 0, offset = 0;

  Attention(const Tensor& qt, const Tensor& kt, const Tensor& vt, const Tensor& m, const kernels::AttentionArgs& a)
      : q(qt.data<T>()),
        k(kt.data<T>()),
        v(vt.data<T>()),
        batches(qt.shape()[0]),
        queries(qt.shape()[1]),
        keys(kt.shape()[1]),
        depth(qt.shape()[2]),
        value_depth(vt.shape()[2]),
        scale(static_cast<T>(a.scale)),
        dropout(a.dropout_p > 0),
        threshold(static_cast<uint32_t>(std::ceil(a.dropout_p * 16777216.0))),
        keep_scale(a.dropout_p < 1 ? static_cast<T>(1.0 / (1.0 - a.dropout_p)) : T(0)),
        seed(a.seed),
        offset(a.offset) {
    if (!m.defined()) return;
    mask = m.raw_data();
    additive = m.dtype() != DType::b8;
    const int64_t dims = m.dim();
    mask_row = m.strides()[dims - 2], mask_col = m.strides()[dims - 1];
    for (int64_t b = 0; b < batches; ++b) {  // b unravelled over the view's batch dims
      int64_t rest = b, at = 0;              // raw_data() is at the view's offset already
      for (int64_t d = dims - 3; d >= 0; --d) {
        at += rest % m.shape()[d] * m.strides()[d];
        rest /= m.shape()[d];
      }
      mask_base.push_back(at);
    }
  }

  // q_i . k_j * scale, plus the mask's term (-inf where masked).
  T score(int64_t b, int64_t i, int64_t j) const {
    const T* __restrict qi = q + (b * queries + i) * depth;
    const T* __restrict kj = k + (b * keys + j) * depth;
    T s = 0;
#pragma omp simd reduction(+ : s)
    for (int64_t d = 0; d < depth; ++d) s += qi[d] * kj[d];
    s *= scale;
    if (!mask) return s;
    const int64_t at = mask_base[b] + i * mask_row + j * mask_col;
    if (additive) return s + static_cast<const T*>(mask)[at];
    return static_cast<const bool*>(mask)[at] ? -std::numeric_limits<T>::infinity() : s;
  }

  // 1 without dropout; else 1/(1-p) or 0, as dropout draws element (b Tq + i) Tk + j.
  T keep(int64_t b, int64_t i, int64_t j) const {
    if (!dropout) return 1;
    const uint64_t element = static_cast<uint64_t>((b * queries + i) * keys + j);
    const Philox4x32 bits = philox_block(seed, offset, element / 4);
    return (bits.v[element % 4] >> 8) >= threshold ? keep_scale : T(0);
  }

  // The softmax weight of (b, i, j) from row i's log-sum-exp (0 where masked, or where
  // every key of the row is).
  T weight(int64_t b, int64_t i, int64_t j, T lse) const {
    if (lse == -std::numeric_limits<T>::infinity()) return 0;
    return std::exp(score(b, i, j) - lse);
  }

  int64_t work() const { return batches * queries * keys * (depth + value_depth); }

  // rows[first, first + n) of a [B, T, cols] operand of batch b, transposed into out[c][t]
  // (kKeyBlock wide): a block's scores and products then run along the keys, vectorized.
  static void transpose_block(const T* x, int64_t rows, int64_t cols, int64_t b, int64_t first, int64_t n, T* out) {
    for (int64_t t = 0; t < n; ++t)
      for (int64_t c = 0; c < cols; ++c) out[c * kKeyBlock + t] = x[(b * rows + first + t) * cols + c];
  }

  // out[t] = row . column t of a transposed block (block[c * kKeyBlock + t]), t < n:
  // along the keys, so the inner loop is a vector loop.
  static void row_times_block(const T* __restrict row, int64_t cols, const T* block, int64_t n, T* __restrict out) {
    std::fill(out, out + n, T(0));
    for (int64_t c = 0; c < cols; ++c) {
      const T x = row[c];
      const T* __restrict column = block + c * kKeyBlock;
#pragma omp simd
      for (int64_t t = 0; t < n; ++t) out[t] += x * column[t];
    }
  }

  // s[t] = row i's scores against keys [first, first + n), kt their transposed block.
  void block_scores(int64_t b, int64_t i, int64_t first, int64_t n, const T* kt, T* s) const {
    row_times_block(q + (b * queries + i) * depth, depth, kt, n, s);
    for (int64_t t = 0; t < n; ++t) {
      s[t] *= scale;
      if (!mask) continue;
      const int64_t at = mask_base[b] + i * mask_row + (first + t) * mask_col;
      if (additive)
        s[t] += static_cast<const T*>(mask)[at];
      else if (static_cast<const bool*>(mask)[at])
        s[t] = -std::numeric_limits<T>::infinity();
    }
  }

  // z[t] = keep(b, i, first + t): one Philox block per four weights.
  void block_keeps(int64_t b, int64_t i, int64_t first, int64_t n, T* z) const {
    if (!dropout) return std::fill(z, z + n, T(1));
    const uint64_t start = static_cast<uint64_t>((b * queries + i) * keys + first);
    Philox4x32 bits{};
    for (int64_t t = 0; t < n; ++t) {
      const uint64_t element = start + static_cast<uint64_t>(t);
      if (t == 0 || element % 4 == 0) bits = philox_block(seed, offset, element / 4);
      z[t] = (bits.v[element % 4] >> 8) >= threshold ? keep_scale : T(0);
    }
  }
};

// Query rows in chunks of kRowChunk: a task's rows share each transposed key block.
constexpr int64_t kRowChunk = 32;

// Runs body(r) for r in [0, n), split among the threads when Fast and the call is large.
template <bool Fast, typename Body>
void for_rows(int64_t n, int64_t work, Body body) {
  const bool parallel = Fast && work >= kParallelWork && !omp_in_parallel();
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t r = 0; r < n; ++r) body(r);
}

template <typename T>
void forward_fast(const Tensor& out, const Tensor& lse, const Tensor& qt, const Tensor& kt, const Tensor& vt,
                  const Tensor& mask, const kernels::AttentionArgs& args) {
  const Attention<T> a(qt, kt, vt, mask, args);
  const T minus_inf = -std::numeric_limits<T>::infinity();
  const int64_t chunks = (a.queries + kRowChunk - 1) / kRowChunk;
  for_rows<true>(a.batches * chunks, a.work(), [&](int64_t task) {
    const int64_t b = task / chunks, first_row = task % chunks * kRowChunk;
    const int64_t rows = std::min(kRowChunk, a.queries - first_row);
    std::vector<T> keys_t(static_cast<size_t>(a.depth * kKeyBlock));
    T running_max[kRowChunk], sum[kRowChunk], s[kKeyBlock], z[kKeyBlock];
    std::fill(running_max, running_max + rows, minus_inf);
    std::fill(sum, sum + rows, T(0));
    T* o_chunk = out.data<T>() + (b * a.queries + first_row) * a.value_depth;
    std::fill(o_chunk, o_chunk + rows * a.value_depth, T(0));
    for (int64_t first = 0; first < a.keys; first += kKeyBlock) {
      const int64_t n = std::min(kKeyBlock, a.keys - first);
      Attention<T>::transpose_block(a.k, a.keys, a.depth, b, first, n, keys_t.data());
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t i = first_row + r;
        a.block_scores(b, i, first, n, keys_t.data(), s);
        const T block_max = *std::max_element(s, s + n);
        if (block_max == minus_inf) continue;  // every key of the block masked
        const T new_max = std::max(running_max[r], block_max);
        const T rescale = std::exp(running_max[r] - new_max);  // 0 on the row's first unmasked block
        T* __restrict o = o_chunk + r * a.value_depth;
        sum[r] *= rescale;
#pragma omp simd
        for (int64_t d = 0; d < a.value_depth; ++d) o[d] *= rescale;
        a.block_keeps(b, i, first, n, z);
        for (int64_t t = 0; t < n; ++t) {
          const T p = std::exp(s[t] - new_max);
          sum[r] += p;
          const T w = p * z[t];
          if (w == 0) continue;
          const T* __restrict vj = a.v + (b * a.keys + first + t) * a.value_depth;
#pragma omp simd
          for (int64_t d = 0; d < a.value_depth; ++d) o[d] += w * vj[d];
        }
        running_max[r] = new_max;
      }
    }
    for (int64_t r = 0; r < rows; ++r) {
      T* __restrict o = o_chunk + r * a.value_depth;
      const int64_t row = b * a.queries + first_row + r;
      if (sum[r] > 0) {
        const T inverse = T(1) / sum[r];
#pragma omp simd
        for (int64_t d = 0; d < a.value_depth; ++d) o[d] *= inverse;
        lse.data<T>()[row] = running_max[r] + std::log(sum[r]);
      } else {
        lse.data<T>()[row] = minus_inf;  // every key masked: a row of zeros, as loom's softmax gives
      }
    }
  });
}

// The whole row at once: its max, then the exponentials' sum and the weighted values'
// sum in key order, divided at the end.
template <typename T>
void forward_reference(const Tensor& out, const Tensor& lse, const Tensor& qt, const Tensor& kt, const Tensor& vt,
                       const Tensor& mask, const kernels::AttentionArgs& args) {
  const Attention<T> a(qt, kt, vt, mask, args);
  const T minus_inf = -std::numeric_limits<T>::infinity();
  std::vector<T> s(static_cast<size_t>(a.keys));
  for (int64_t r = 0; r < a.batches * a.queries; ++r) {
    const int64_t b = r / a.queries, i = r % a.queries;
    T* o = out.data<T>() + r * a.value_depth;
    std::fill(o, o + a.value_depth, T(0));
    T top = minus_inf, sum = 0;
    for (int64_t j = 0; j < a.keys; ++j) top = std::max(top, s[j] = a.score(b, i, j));
    if (top == minus_inf) {  // every key masked
      lse.data<T>()[r] = minus_inf;
      continue;
    }
    for (int64_t j = 0; j < a.keys; ++j) {
      const T p = std::exp(s[j] - top);
      sum += p;
      const T w = p * a.keep(b, i, j);
      for (int64_t d = 0; d < a.value_depth; ++d) o[d] += w * a.v[(b * a.keys + j) * a.value_depth + d];
    }
    const T inverse = T(1) / sum;
    for (int64_t d = 0; d < a.value_depth; ++d) o[d] *= inverse;
    lse.data<T>()[r] = top + std::log(sum);
  }
}

// dS_ij = P_ij (dP_ij - D_i), dP_ij = Z_ij grad_i . v_j, D_i = grad_i . out_i (Z: the
// dropout factor); dq_i = scale sum_j dS_ij k_j; dk_j = scale sum_i dS_ij q_i;
// dv_j = sum_i P_ij Z_ij grad_i. The reference: weight by weight, dq by query rows, then
// dk and dv by key rows, on one thread.
template <typename T>
void backward_reference(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& grad, const Tensor& qt,
                        const Tensor& kt, const Tensor& vt, const Tensor& mask, const Tensor& out, const Tensor& lse,
                        const kernels::AttentionArgs& args) {
  const Attention<T> a(qt, kt, vt, mask, args);
  const T* g = grad.data<T>();
  const T* o = out.data<T>();
  const T* lse_row = lse.data<T>();
  const int64_t rows = a.batches * a.queries, D = a.depth, Dv = a.value_depth;
  std::vector<T> row_dot(static_cast<size_t>(rows));  // D_i
  auto dot = [](const T* __restrict x, const T* __restrict y, int64_t n) {
    T s = 0;
#pragma omp simd reduction(+ : s)
    for (int64_t d = 0; d < n; ++d) s += x[d] * y[d];
    return s;
  };
  for (int64_t r = 0; r < rows; ++r) row_dot[r] = dot(g + r * Dv, o + r * Dv, Dv);
  // The score's gradient dS_ij and the dropped weight P_ij Z_ij.
  auto gradients = [&](int64_t b, int64_t i, int64_t j, T& ds, T& dropped) {
    const int64_t r = b * a.queries + i;
    const T p = a.weight(b, i, j, lse_row[r]);
    if (p == 0) return false;
    const T z = a.keep(b, i, j);
    dropped = p * z;
    ds = p * (z * dot(g + r * Dv, a.v + (b * a.keys + j) * Dv, Dv) - row_dot[r]);
    return true;
  };
  for_rows<false>(rows, a.work(), [&](int64_t r) {  // dq, one query row each
    const int64_t b = r / a.queries, i = r % a.queries;
    T* __restrict dqi = dq.data<T>() + r * D;
    std::fill(dqi, dqi + D, T(0));
    for (int64_t j = 0; j < a.keys; ++j) {
      T ds, dropped;
      if (!gradients(b, i, j, ds, dropped)) continue;
      const T* __restrict kj = a.k + (b * a.keys + j) * D;
#pragma omp simd
      for (int64_t d = 0; d < D; ++d) dqi[d] += ds * a.scale * kj[d];
    }
  });
  for_rows<false>(a.batches * a.keys, a.work(), [&](int64_t c) {  // dk and dv, one key row each
    const int64_t b = c / a.keys, j = c % a.keys;
    T* __restrict dkj = dk.data<T>() + c * D;
    T* __restrict dvj = dv.data<T>() + c * Dv;
    std::fill(dkj, dkj + D, T(0));
    std::fill(dvj, dvj + Dv, T(0));
    for (int64_t i = 0; i < a.queries; ++i) {
      T ds, dropped;
      if (!gradients(b, i, j, ds, dropped)) continue;
      const T* __restrict qi = a.q + (b * a.queries + i) * D;
      const T* __restrict gi = g + (b * a.queries + i) * Dv;
#pragma omp simd
      for (int64_t d = 0; d < D; ++d) dkj[d] += ds * a.scale * qi[d];
#pragma omp simd
      for (int64_t d = 0; d < Dv; ++d) dvj[d] += dropped * gi[d];
    }
  });
}

// The fast backward in blocks: dq by chunks of query rows against each transposed key
// and value block, then dk and dv by blocks of keys against every query row in order.
template <typename T>
void backward_fast(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& grad, const Tensor& qt,
                   const Tensor& kt, const Tensor& vt, const Tensor& mask, const Tensor& out, const Tensor& lse,
                   const kernels::AttentionArgs& args) {
  const Attention<T> a(qt, kt, vt, mask, args);
  const T* g = grad.data<T>();
  const T* lse_row = lse.data<T>();
  const int64_t rows = a.batches * a.queries, D = a.depth, Dv = a.value_depth;
  const T minus_inf = -std::numeric_limits<T>::infinity();
  std::vector<T> row_dot(static_cast<size_t>(rows));  // D_i = grad_i . out_i
  for (int64_t r = 0; r < rows; ++r) {
    T sum = 0;
    for (int64_t d = 0; d < Dv; ++d) sum += g[r * Dv + d] * out.data<T>()[r * Dv + d];
    row_dot[r] = sum;
  }
  // For row i against keys [first, first + n): ds[t] and the dropped weight pz[t] (both 0
  // where the weight is); kt and vt the block's transposed keys and values.
  auto block_gradients = [&](int64_t b, int64_t i, int64_t first, int64_t n, const T* kt_block, const T* vt_block,
                             T* ds, T* pz) {
    const int64_t r = b * a.queries + i;
    T s[kKeyBlock], z[kKeyBlock], dp[kKeyBlock];
    if (lse_row[r] == minus_inf) {
      std::fill(ds, ds + n, T(0)), std::fill(pz, pz + n, T(0));
      return;
    }
    a.block_scores(b, i, first, n, kt_block, s);
    a.block_keeps(b, i, first, n, z);
    Attention<T>::row_times_block(g + r * Dv, Dv, vt_block, n, dp);
    for (int64_t t = 0; t < n; ++t) {
      const T p = s[t] == minus_inf ? T(0) : std::exp(s[t] - lse_row[r]);
      pz[t] = p * z[t];
      ds[t] = p * (z[t] * dp[t] - row_dot[r]);
    }
  };
  const int64_t chunks = (a.queries + kRowChunk - 1) / kRowChunk;
  for_rows<true>(a.batches * chunks, a.work(), [&](int64_t task) {  // dq
    const int64_t b = task / chunks, first_row = task % chunks * kRowChunk;
    const int64_t count = std::min(kRowChunk, a.queries - first_row);
    std::vector<T> keys_t(static_cast<size_t>(D * kKeyBlock)), values_t(static_cast<size_t>(Dv * kKeyBlock));
    T ds[kKeyBlock], pz[kKeyBlock];
    T* dq_chunk = dq.data<T>() + (b * a.queries + first_row) * D;
    std::fill(dq_chunk, dq_chunk + count * D, T(0));
    for (int64_t first = 0; first < a.keys; first += kKeyBlock) {
      const int64_t n = std::min(kKeyBlock, a.keys - first);
      Attention<T>::transpose_block(a.k, a.keys, D, b, first, n, keys_t.data());
      Attention<T>::transpose_block(a.v, a.keys, Dv, b, first, n, values_t.data());
      for (int64_t r = 0; r < count; ++r) {
        block_gradients(b, first_row + r, first, n, keys_t.data(), values_t.data(), ds, pz);
        T* __restrict dqi = dq_chunk + r * D;
        for (int64_t t = 0; t < n; ++t) {
          if (ds[t] == 0) continue;
          const T w = ds[t] * a.scale;
          const T* __restrict kj = a.k + (b * a.keys + first + t) * D;
#pragma omp simd
          for (int64_t d = 0; d < D; ++d) dqi[d] += w * kj[d];
        }
      }
    }
  });
  const int64_t key_blocks = (a.keys + kKeyBlock - 1) / kKeyBlock;
  for_rows<true>(a.batches * key_blocks, a.work(), [&](int64_t task) {  // dk and dv
    const int64_t b = task / key_blocks, first = task % key_blocks * kKeyBlock;
    const int64_t n = std::min(kKeyBlock, a.keys - first);
    std::vector<T> keys_t(static_cast<size_t>(D * kKeyBlock)), values_t(static_cast<size_t>(Dv * kKeyBlock));
    Attention<T>::transpose_block(a.k, a.keys, D, b, first, n, keys_t.data());
    Attention<T>::transpose_block(a.v, a.keys, Dv, b, first, n, values_t.data());
    T ds[kKeyBlock], pz[kKeyBlock];
    T* dk_block = dk.data<T>() + (b * a.keys + first) * D;
    T* dv_block = dv.data<T>() + (b * a.keys + first) * Dv;
    std::fill(dk_block, dk_block + n * D, T(0));
    std::fill(dv_block, dv_block + n * Dv, T(0));
    for (int64_t i = 0; i < a.queries; ++i) {
      block_gradients(b, i, first, n, keys_t.data(), values_t.data(), ds, pz);
      const T* __restrict qi = a.q + (b * a.queries + i) * D;
      const T* __restrict gi = g + (b * a.queries + i) * Dv;
      for (int64_t t = 0; t < n; ++t) {
        if (ds[t] != 0) {
          const T w = ds[t] * a.scale;
          T* __restrict dkj = dk_block + t * D;
#pragma omp simd
          for (int64_t d = 0; d < D; ++d) dkj[d] += w * qi[d];
        }
        if (pz[t] != 0) {
          T* __restrict dvj = dv_block + t * Dv;
#pragma omp simd
          for (int64_t d = 0; d < Dv; ++d) dvj[d] += pz[t] * gi[d];
        }
      }
    }
  });
}

// ---- bfloat16: float32's kernels on widened copies of the operands ([B, T, D] each,
// never [T, T]: attention is compute-bound, O(T D) conversions against O(T^2 D)
// products), each result rounded once; the log-sum-exp stays float32 ----

// A bfloat16 view's elements as a dense float32 tensor; an additive mask (an expanded
// view, [.., Tq, Tk] in shape only) keeps its strides over a widened copy of its storage.
Tensor widened(const Tensor& t) {
  if (!t.defined() || t.dtype() != DType::bf16) return t;
  const auto* from = static_cast<const bfloat16*>(t.storage()->data());
  if (!t.is_contiguous()) {
    const int64_t stored = static_cast<int64_t>(t.storage()->nbytes() / sizeof(bfloat16));
    Tensor base = Tensor::empty({stored}, {DType::f32, t.device()});
    detail::widen(from, stored, base.data<float>());
    return Tensor::make_view(base, t.shape(), t.strides(), t.offset());
  }
  Tensor wide = Tensor::empty(t.shape(), {DType::f32, t.device()});
  detail::widen(from + t.offset(), t.numel(), wide.data<float>());
  return wide;
}
// dense `to` (bfloat16) = dense float32 `from`, rounded.
void narrow_into(const Tensor& to, const Tensor& from) {
  detail::narrow(from.data<float>(), from.numel(), to.data<bfloat16>());
}
Tensor float_like(const Tensor& t) { return Tensor::empty(t.shape(), {DType::f32, t.device()}); }

template <bool Fast>
void forward_bf16(const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k, const Tensor& v,
                  const Tensor& mask, const kernels::AttentionArgs& args) {
  const Tensor wide = float_like(out);
  (Fast ? forward_fast<float> : forward_reference<float>)(wide, lse, widened(q), widened(k), widened(v), widened(mask),
                                                          args);
  narrow_into(out, wide);
}

template <bool Fast>
void backward_bf16(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& grad, const Tensor& q,
                   const Tensor& k, const Tensor& v, const Tensor& mask, const Tensor& out, const Tensor& lse,
                   const kernels::AttentionArgs& args) {
  const Tensor wq = float_like(dq), wk = float_like(dk), wv = float_like(dv);
  (Fast ? backward_fast<float> : backward_reference<float>)(wq, wk, wv, widened(grad), widened(q), widened(k),
                                                            widened(v), widened(mask), widened(out), lse, args);
  narrow_into(dq, wq), narrow_into(dk, wk), narrow_into(dv, wv);
}

template <typename T>
void register_for() {
  register_kernel<kernels::AttentionKernel>("flash_attention", DeviceType::cpu, dtype_of<T>(), forward_fast<T>,
                                            forward_reference<T>);
  register_kernel<kernels::AttentionBackwardKernel>("flash_attention_backward", DeviceType::cpu, dtype_of<T>(),
                                                    backward_fast<T>, backward_reference<T>);
}

}  // namespace

LOOM_KERNELS(cpu_flash_attention) {
  kernels::for_each_type(FloatingTypes{}, [](auto tag) { register_for<typename decltype(tag)::type>(); });
  register_kernel<kernels::AttentionKernel>("flash_attention", DeviceType::cpu, DType::bf16, forward_bf16<true>,
                                            forward_bf16<false>);
  register_kernel<kernels::AttentionBackwardKernel>("flash_attention_backward", DeviceType::cpu, DType::bf16,
                                                    backward_bf16<true>, backward_bf16<false>);
}

}  // namespace loom
