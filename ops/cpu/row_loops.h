#pragma once
// Rows of a dense tensor for the CPU kernels of the fused last-dim ops (softmax,
// log_softmax, layer norm, cross-entropy): each row is computed start to finish
// by one thread in a fixed order, so results are the same bits for any thread count.
#include <omp.h>

#include <algorithm>
#include <limits>
#include <vector>

#include "loom/kernels/loops.h"
#include "loom/tensor.h"

namespace loom::detail {

// [..., D] seen as rows x D (a 0-d tensor is one row of one element).
struct RowShape {
  int64_t rows = 0, size = 0;
};
inline RowShape row_shape(const Tensor& x) {
  int64_t size = x.dim() == 0 ? 1 : x.shape().back();
  return {size == 0 ? 0 : x.numel() / size, size};
}

// body(r) for every row r; static split over threads when the work is large.
template <typename Body>
void parallel_rows(int64_t rows, int64_t size, Body body) {
  const bool parallel = rows > 1 && rows * size >= kernels::kParallelGrain && !omp_in_parallel();
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t r = 0; r < rows; ++r) body(r);
}

// An optional tensor's elements (a layer norm's weight or bias), or null when it is undefined.
template <typename T>
const T* data_or_null(const Tensor& t) {
  return t.defined() ? t.data<T>() : nullptr;
}

// ---- bfloat16 rows computed in float32: chunks of rows widened into scratch ----

// Rows per chunk: up to 64, fewer for long rows, so that a chunk's scratch (about 2^14
// floats per array) stays in cache.
inline int64_t widened_chunk_rows(int64_t row_size) {
  return std::clamp<int64_t>((int64_t(1) << 14) / std::max<int64_t>(row_size, 1), 1, 64);
}
inline int64_t row_chunk_count(RowShape s) {
  const int64_t per_chunk = widened_chunk_rows(s.size);
  return (s.rows + per_chunk - 1) / per_chunk;
}
// body(chunk, first row, rows) for each chunk, the chunks split among the threads.
template <typename Body>
void for_each_row_chunk(RowShape s, Body body) {
  const int64_t per_chunk = widened_chunk_rows(s.size), chunks = row_chunk_count(s);
  const bool parallel = chunks > 1 && s.rows * s.size >= kernels::kParallelGrain && !omp_in_parallel();
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t c = 0; c < chunks; ++c) body(c, c * per_chunk, std::min(per_chunk, s.rows - c * per_chunk));
}
// This thread's float32 scratch of at least n elements (reused from call to call).
inline float* row_scratch(int64_t n) {
  thread_local std::vector<float> scratch;
  if (static_cast<int64_t>(scratch.size()) < n) scratch.resize(static_cast<size_t>(n));
  return scratch.data();
}
inline void widen(const bfloat16* from, int64_t n, float* to) { std::copy(from, from + n, to); }
inline void narrow(const float* from, int64_t n, bfloat16* to) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) to[i] = from[i];
}

// A layer norm's weight or bias as its kernels read it (compute_type<T>): T's own
// elements, or a bfloat16 one's widened to float32 once per call; null when undefined.
template <typename T>
class ParamData {
 public:
  explicit ParamData(const Tensor& t) {
    if (!t.defined()) return;
    if constexpr (std::is_same_v<T, bfloat16>) {
      const bfloat16* p = t.data<bfloat16>();
      widened_.assign(p, p + t.numel());
      data_ = widened_.data();
    } else {
      data_ = t.data<T>();
    }
  }
  const compute_type<T>* get() const { return data_; }

 private:
  std::vector<float> widened_;
  const compute_type<T>* data_ = nullptr;
};

template <typename T>
inline constexpr T kNegInf = -std::numeric_limits<T>::infinity();

// Asks for the next row's cache lines while this row is computed. A long row
// (a vocabulary of 8000 floats, 32 KiB) is read from memory by its first pass
// and then worked on in cache by the exp pass; without this the memory idles
// during the arithmetic (cross-entropy's forward: 3.1 -> 1.9 ms).
template <typename T>
inline void prefetch_next_row(const T* row, int64_t r, RowShape s) {
  if (r + 1 >= s.rows) return;
  const T* next = row + s.size;
  for (int64_t j = 0; j < s.size; j += 64 / static_cast<int64_t>(sizeof(T))) __builtin_prefetch(next + j, 0, 2);
}

}  // namespace loom::detail
