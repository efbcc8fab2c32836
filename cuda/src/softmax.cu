// Softmax, log_softmax and their backward: one block per row (grid-stride over
// rows), the row's max and sums through block_combine in double.
#include <cmath>
#include <cstdint>

#include "block_reduce.cuh"
#include "kernel_errors.h"
#include "rows_launch.h"

namespace loom::cuda {

namespace {

// x's logit j of row r after masking: x + mask, or -inf where a bool mask is true.
template <typename T>
__device__ T masked_logit(T x, const RowMaskArgs& m, const char* mask_row, int64_t j) {
  if (m.kind == RowMaskArgs::additive) return x + reinterpret_cast<const T*>(mask_row)[j * m.step];
  if (m.kind == RowMaskArgs::boolean)
    return reinterpret_cast<const unsigned char*>(mask_row)[j * m.step] ? T(-INFINITY) : x;
  return x;
}

template <typename T>
__device__ const char* mask_row(const RowMaskArgs& m, int64_t r) {
  if (m.kind == RowMaskArgs::none) return nullptr;
  const int64_t element = m.kind == RowMaskArgs::boolean ? 1 : sizeof(T);
  return static_cast<const char*>(m.data) + walk_offset(r, m.outer_ndim, m.outer_sizes, m.outer_strides) * element;
}

template <typename T>
__global__ void softmax_kernel(Rows s, T* out, const T* x, RowMaskArgs m, bool log_output) {
  __shared__ double scratch[kMaxBlockThreads];
  const int64_t n = s.size;
  for (int64_t r = blockIdx.x; r < s.rows; r += gridDim.x) {
    const T* xr = x + r * n;
    T* yr = out + r * n;
    const char* mr = mask_row<T>(m, r);
    double mx = -INFINITY;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
      const T z = masked_logit(xr[j], m, mr, j);
      yr[j] = z;  // the logits, kept for the next passes (each thread reads back its own)
      mx = z > mx ? double(z) : mx;
    }
    mx = block_combine(mx, scratch, MaxOp{});
    if (mx == -INFINITY) {  // fully masked row: zeros (softmax) or -inf (log_softmax), not 0/0
      for (int64_t j = threadIdx.x; j < n; j += blockDim.x) yr[j] = log_output ? T(-INFINITY) : T(0);
      continue;
    }
    const T max_t = static_cast<T>(mx);
    double total = 0;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) total += exp(yr[j] - max_t);
    total = block_combine(total, scratch, PlusOp{});
    if (log_output) {
      const double log_total = log(total);
      for (int64_t j = threadIdx.x; j < n; j += blockDim.x) yr[j] = static_cast<T>(double(yr[j] - max_t) - log_total);
    } else {
      const T inv = static_cast<T>(1.0 / total);
      for (int64_t j = threadIdx.x; j < n; j += blockDim.x) yr[j] = exp(yr[j] - max_t) * inv;
    }
  }
}

// softmax: out = y (g - sum(g y)); log_softmax: out = g - exp(y) sum(g), masked (-inf) entries 0.
template <typename T>
__global__ void softmax_backward_kernel(Rows s, T* out, const T* y, const T* g, bool log_output) {
  __shared__ double scratch[kMaxBlockThreads];
  const int64_t n = s.size;
  for (int64_t r = blockIdx.x; r < s.rows; r += gridDim.x) {
    const T* yr = y + r * n;
    const T* gr = g + r * n;
    T* o = out + r * n;
    double sum = 0;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
      if (log_output)
        sum += yr[j] == T(-INFINITY) ? 0.0 : double(gr[j]);
      else
        sum += double(gr[j] * yr[j]);
    }
    const T total = static_cast<T>(block_combine(sum, scratch, PlusOp{}));
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
      if (log_output)
        o[j] = yr[j] == T(-INFINITY) ? T(0) : gr[j] - exp(yr[j]) * total;
      else
        o[j] = yr[j] * (gr[j] - total);
    }
  }
}

int64_t row_blocks(int64_t rows) { return rows < kMaxBlocks ? (rows > 0 ? rows : 1) : kMaxBlocks; }

}  // namespace

template <typename T>
void launch_softmax(bool log_output, Rows s, void* out, const void* x, const RowMaskArgs& mask, cudaStream_t stream) {
  if (s.rows == 0 || s.size == 0) return;
  softmax_kernel<T><<<row_blocks(s.rows), row_threads(s.size), 0, stream>>>(s, static_cast<T*>(out),
                                                                            static_cast<const T*>(x), mask, log_output);
  check_kernel_launch("softmax_kernel");
}

template <typename T>
void launch_softmax_backward(bool log_output, Rows s, void* out, const void* y, const void* grad, cudaStream_t stream) {
  if (s.rows == 0 || s.size == 0) return;
  softmax_backward_kernel<T><<<row_blocks(s.rows), row_threads(s.size), 0, stream>>>(
      s, static_cast<T*>(out), static_cast<const T*>(y), static_cast<const T*>(grad), log_output);
  check_kernel_launch("softmax_backward_kernel");
}

template void launch_softmax<float>(bool, Rows, void*, const void*, const RowMaskArgs&, cudaStream_t);
template void launch_softmax<double>(bool, Rows, void*, const void*, const RowMaskArgs&, cudaStream_t);
template void launch_softmax_backward<float>(bool, Rows, void*, const void*, const void*, cudaStream_t);
template void launch_softmax_backward<double>(bool, Rows, void*, const void*, const void*, cudaStream_t);

}  // namespace loom::cuda
