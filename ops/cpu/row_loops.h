#pragma once
// Rows of a dense tensor for the CPU kernels of the fused last-dim ops (softmax,
// log_softmax, layer norm, cross-entropy): each row is computed start to finish
// by one thread in a fixed order, so results are the same bits for any thread count.
#include <omp.h>

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
