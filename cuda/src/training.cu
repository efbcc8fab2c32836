#include <cub/device/device_radix_sort.cuh>

#include <cmath>
#include <cstdint>

#include "kernel_errors.h"
#include "loom/cuda/launch.h"
#include "loom/philox.h"
#include "training_launch.h"

namespace loom::cuda {

namespace {

constexpr int kWarp = 32;

// One warp per 32 elements (one mask word): each lane draws its element's word,
// the warp's keep bits gathered with a ballot (a word written by one lane).
template <typename T>
__global__ void dropout_kernel(T* out, uint32_t* mask, const T* x, int64_t n, uint32_t threshold, T scale,
                               uint64_t seed, uint64_t offset) {
  const int lane = threadIdx.x % kWarp;
  const int64_t warps = int64_t(gridDim.x) * blockDim.x / kWarp;
  for (int64_t word = (blockIdx.x * int64_t(blockDim.x) + threadIdx.x) / kWarp; word * kWarp < n; word += warps) {
    const int64_t i = word * kWarp + lane;
    bool keep = false;
    if (i < n) {
      const Philox4x32 bits = philox_block(seed, offset, philox_block_of(i));
      keep = (bits.v[i % 4] >> 8) >= threshold;
      const T scaled = x[i] * scale;
      out[i] = keep ? scaled : T(0);
    }
    const uint32_t word_bits = __ballot_sync(0xffffffffu, keep);
    if (lane == 0) mask[word] = word_bits;
  }
}

template <typename T>
__global__ void dropout_backward_kernel(T* out, const T* grad, const uint32_t* mask, int64_t n, T scale) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const T scaled = grad[i] * scale;
    out[i] = (mask[i / kWarp] >> (i % kWarp)) & 1u ? scaled : T(0);
  }
}

template <typename T>
__global__ void adam_kernel(T* w, const T* g, T* m, T* v, int64_t n, AdamArgs a) {
  const T beta1 = static_cast<T>(a.beta1), beta2 = static_cast<T>(a.beta2), eps = static_cast<T>(a.eps);
  const T step = static_cast<T>(a.step_size), root_c2 = static_cast<T>(a.root_correction2);
  const T shrink = static_cast<T>(a.shrink), wd = static_cast<T>(a.l2);
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const T gi = g[i] + wd * w[i];
    m[i] = beta1 * m[i] + (T(1) - beta1) * gi;
    v[i] = beta2 * v[i] + (T(1) - beta2) * gi * gi;
    w[i] = shrink * w[i] - step * m[i] / (sqrt(v[i]) / root_c2 + eps);
  }
}

template <typename T>
__global__ void sgd_kernel(T* w, const T* g, T* buf, int64_t n, SgdArgs a) {
  const T lr = static_cast<T>(a.lr), wd = static_cast<T>(a.weight_decay), mu = static_cast<T>(a.momentum);
  const T keep = static_cast<T>(1.0 - a.dampening);
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    T d = g[i] + wd * w[i];
    if (buf) {
      buf[i] = a.first ? d : mu * buf[i] + keep * d;
      d = a.nesterov ? d + mu * buf[i] : buf[i];
    }
    w[i] -= lr * d;
  }
}

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
    if (sorted[mid] < value) lo = mid + 1;
    else hi = mid;
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
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) out[i] = i;
}

template <typename T>
__global__ void arange_kernel(T* out, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    out[i] = static_cast<T>(i);
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
void launch_dropout(void* out, uint32_t* mask, const void* x, int64_t n, double p, uint64_t seed, uint64_t offset,
                    cudaStream_t stream) {
  if (n == 0) return;
  const T scale = p < 1.0 ? static_cast<T>(1.0 / (1.0 - p)) : T(0);
  const uint32_t threshold = static_cast<uint32_t>(std::ceil(p * 16777216.0));
  const int64_t words = (n + kWarp - 1) / kWarp;
  dropout_kernel<T><<<blocks_for(words * kWarp), kThreads, 0, stream>>>(
      static_cast<T*>(out), mask, static_cast<const T*>(x), n, threshold, scale, seed, offset);
  check_kernel_launch("dropout_kernel");
}

template <typename T>
void launch_dropout_backward(void* out, const void* grad, const uint32_t* mask, int64_t n, double p,
                             cudaStream_t stream) {
  if (n == 0) return;
  const T scale = p < 1.0 ? static_cast<T>(1.0 / (1.0 - p)) : T(0);
  dropout_backward_kernel<T><<<blocks_for(n), kThreads, 0, stream>>>(static_cast<T*>(out), static_cast<const T*>(grad),
                                                                     mask, n, scale);
  check_kernel_launch("dropout_backward_kernel");
}

template <typename T>
void launch_adam_step(void* w, const void* grad, void* m, void* v, int64_t n, const AdamArgs& a, cudaStream_t stream) {
  if (n == 0) return;
  adam_kernel<T><<<blocks_for(n), kThreads, 0, stream>>>(static_cast<T*>(w), static_cast<const T*>(grad),
                                                         static_cast<T*>(m), static_cast<T*>(v), n, a);
  check_kernel_launch("adam_kernel");
}

template <typename T>
void launch_sgd_step(void* w, const void* grad, void* buffer, int64_t n, const SgdArgs& a, cudaStream_t stream) {
  if (n == 0) return;
  sgd_kernel<T><<<blocks_for(n), kThreads, 0, stream>>>(static_cast<T*>(w), static_cast<const T*>(grad),
                                                        static_cast<T*>(buffer), n, a);
  check_kernel_launch("sgd_kernel");
}

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
  embedding_backward_kernel<T><<<vocab < kMaxBlocks ? vocab : kMaxBlocks, threads, 0, stream>>>(
      static_cast<T*>(out), static_cast<const T*>(grad), s.sorted_ids, s.order, n, vocab, dim, padding_idx);
  check_kernel_launch("embedding_backward_kernel");
}

template <typename T>
void launch_arange(void* out, int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  arange_kernel<T><<<blocks_for(n), kThreads, 0, stream>>>(static_cast<T*>(out), n);
  check_kernel_launch("arange_kernel");
}

#define LOOM_CUDA_FLOATING(T)                                                                                      \
  template void launch_dropout<T>(void*, uint32_t*, const void*, int64_t, double, uint64_t, uint64_t, cudaStream_t); \
  template void launch_dropout_backward<T>(void*, const void*, const uint32_t*, int64_t, double, cudaStream_t);      \
  template void launch_adam_step<T>(void*, const void*, void*, void*, int64_t, const AdamArgs&, cudaStream_t);       \
  template void launch_sgd_step<T>(void*, const void*, void*, int64_t, const SgdArgs&, cudaStream_t);
LOOM_CUDA_FLOATING(float)
LOOM_CUDA_FLOATING(double)
#undef LOOM_CUDA_FLOATING

#define LOOM_CUDA_ANY(T)                                                                                        \
  template void launch_embedding<T>(void*, const void*, int64_t, int64_t, const int64_t*, int64_t, int64_t,     \
                                    cudaStream_t);                                                              \
  template void launch_embedding_backward<T>(void*, const void*, const int64_t*, int64_t, int64_t, int64_t,     \
                                             int64_t, void*, size_t, cudaStream_t);                             \
  template void launch_arange<T>(void*, int64_t, cudaStream_t);
LOOM_CUDA_ANY(float)
LOOM_CUDA_ANY(double)
LOOM_CUDA_ANY(int32_t)
LOOM_CUDA_ANY(int64_t)
#undef LOOM_CUDA_ANY
template void launch_embedding<bool>(void*, const void*, int64_t, int64_t, const int64_t*, int64_t, int64_t,
                                     cudaStream_t);

}  // namespace loom::cuda
