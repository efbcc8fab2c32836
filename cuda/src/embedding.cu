// The embedding and its backward on the GPU: rows gathered; gradients summed per id in
// position order after a stable radix sort (deterministic, no atomics).
#include <cub/device/device_radix_sort.cuh>

#include <cstdint>

#include "kernel_errors.h"
#include "loom/cuda/launch.h"
#include "embedding_launch.h"

namespace loom::cuda {

namespace {

template <typename T>
__global__ void embedding_kernel(T* out, const T* weight, int64_t row_stride, int64_t col_stride, const int64_t* ids,
                                 int64_t n, int64_t dim) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n * dim; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t t = i / dim, d = i % dim;
    out[i] = weight[ids[t] * row_stride + d * col_stride];
  }
}

// First position p in sorted[0, n) with sorted[p] >= value.
__device__ int64_t lower_bound(const int64_t* sorted, int64_t n, int64_t value) {
  int64_t lo = 0, hi = n;
  while (lo < hi) {
    const int64_t mid = (lo + hi) / 2;
    if (sorted[mid] < value)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

// One block per vocabulary row (grid-stride), threads across its columns; the
// row's positions are a run of the sorted ids, in position order (stable sort).
template <typename T>
__global__ void embedding_backward_kernel(T* out, const T* grad, const int64_t* sorted_ids, const int64_t* order,
                                          int64_t n, int64_t vocab, int64_t dim, int64_t padding_idx) {
  for (int64_t v = blockIdx.x; v < vocab; v += gridDim.x) {
    const int64_t k0 = lower_bound(sorted_ids, n, v), k1 = lower_bound(sorted_ids, n, v + 1);
    for (int64_t d = threadIdx.x; d < dim; d += blockDim.x) {
      T sum = T(0);
      if (v != padding_idx && k0 < k1) {
        sum = grad[order[k0] * dim + d];
        for (int64_t k = k0 + 1; k < k1; ++k) sum += grad[order[k] * dim + d];
      }
      out[v * dim + d] = sum;
    }
  }
}

__global__ void iota_kernel(int64_t* out, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    out[i] = i;
}

// The scratch layout of the backward: sorted ids, positions in, positions out, cub's temporaries.
struct SortScratch {
  int64_t* sorted_ids;
  int64_t* positions;
  int64_t* order;
  void* temp;
  size_t temp_bytes;
};
size_t round_up(size_t bytes) { return (bytes + 255) / 256 * 256; }
size_t cub_temp_bytes(int64_t n) {
  size_t bytes = 0;
  cub::DeviceRadixSort::SortPairs(nullptr, bytes, static_cast<const int64_t*>(nullptr), static_cast<int64_t*>(nullptr),
                                  static_cast<const int64_t*>(nullptr), static_cast<int64_t*>(nullptr), n);
  return bytes;
}
SortScratch carve(void* scratch, int64_t n) {
  char* p = static_cast<char*>(scratch);
  const size_t ids_bytes = round_up(n * sizeof(int64_t));
  return {reinterpret_cast<int64_t*>(p), reinterpret_cast<int64_t*>(p + ids_bytes),
          reinterpret_cast<int64_t*>(p + 2 * ids_bytes), p + 3 * ids_bytes, cub_temp_bytes(n)};
}

}  // namespace

template <typename T>
void launch_embedding(void* out, const void* weight, int64_t row_stride, int64_t col_stride, const int64_t* ids,
                      int64_t n, int64_t dim, cudaStream_t stream) {
  if (n * dim == 0) return;
  embedding_kernel<T><<<blocks_for(n * dim), kThreads, 0, stream>>>(static_cast<T*>(out), static_cast<const T*>(weight),
                                                                    row_stride, col_stride, ids, n, dim);
  check_kernel_launch("embedding_kernel");
}

size_t embedding_backward_scratch_bytes(int64_t n) { return 3 * round_up(n * sizeof(int64_t)) + cub_temp_bytes(n); }

template <typename T>
void launch_embedding_backward(void* out, const void* grad, const int64_t* ids, int64_t n, int64_t vocab, int64_t dim,
                               int64_t padding_idx, void* scratch, size_t scratch_bytes, cudaStream_t stream) {
  if (vocab * dim == 0) return;
  SortScratch s = carve(scratch, n);
  if (n > 0) {
    iota_kernel<<<blocks_for(n), kThreads, 0, stream>>>(s.positions, n);
    check_kernel_launch("iota_kernel");
    check_kernel_call(cub::DeviceRadixSort::SortPairs(s.temp, s.temp_bytes, ids, s.sorted_ids, s.positions, s.order, n,
                                                      0, 64, stream),
                      "cub::DeviceRadixSort::SortPairs");
  }
  const int threads = dim >= kThreads ? kThreads : 32 * static_cast<int>((dim + 31) / 32);
  const int64_t blocks = vocab < kMaxBlocks ? vocab : kMaxBlocks;
  embedding_backward_kernel<T><<<blocks, threads, 0, stream>>>(static_cast<T*>(out), static_cast<const T*>(grad),
                                                               s.sorted_ids, s.order, n, vocab, dim, padding_idx);
  check_kernel_launch("embedding_backward_kernel");
}

#define LOOM_CUDA_EMBEDDING(T)                                                                                       \
  template void launch_embedding<T>(void*, const void*, int64_t, int64_t, const int64_t*, int64_t, int64_t,          \
                                    cudaStream_t);                                                                   \
  template void launch_embedding_backward<T>(void*, const void*, const int64_t*, int64_t, int64_t, int64_t, int64_t, \
                                             void*, size_t, cudaStream_t);
LOOM_CUDA_EMBEDDING(float)
LOOM_CUDA_EMBEDDING(double)
LOOM_CUDA_EMBEDDING(int32_t)
LOOM_CUDA_EMBEDDING(int64_t)
#undef LOOM_CUDA_EMBEDDING
template void launch_embedding<bool>(void*, const void*, int64_t, int64_t, const int64_t*, int64_t, int64_t,
                                     cudaStream_t);

}  // namespace loom::cuda
