// Label-smoothed cross-entropy: ids checked first (the first bad position,
// found with an integer atomicMin: the same answer whatever the order), row
// losses one block per row, then their sum in row order by one block.
#include <cmath>
#include <cstdint>

#include "block_reduce.cuh"
#include "loom/bfloat16.h"
#include "kernel_errors.h"
#include "rows_launch.h"

namespace loom::cuda {

namespace {

int64_t row_blocks(int64_t rows) { return rows < kMaxBlocks ? (rows > 0 ? rows : 1) : kMaxBlocks; }

__global__ void bad_id_kernel(const int64_t* ids, int64_t n, int64_t limit, int64_t ignore, bool has_ignore,
                              unsigned long long* first) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t id = ids[i];
    if ((has_ignore && id == ignore) || (id >= 0 && id < limit)) continue;
    atomicMin(first, static_cast<unsigned long long>(i));
  }
}

// Row r's max and log of its sum of exp (the softmax's pieces), in double.
template <typename T>
__device__ void row_lse(const T* xr, int64_t n, double* scratch, double& mx, double& lse) {
  double m = -INFINITY;
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) m = xr[j] > m ? double(xr[j]) : m;
  mx = block_combine(m, scratch, MaxOp{});
  double sum = 0;
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) sum += exp(double(xr[j]) - mx);
  lse = log(block_combine(sum, scratch, PlusOp{}));
}

// row_loss[r] = -sum_j w_j log p_j, w_j = eps / n + (1 - eps) [j == target]; 0 on ignored rows.
template <typename T>
__global__ void row_loss_kernel(Rows s, double* row_loss, const T* x, const int64_t* target, double eps,
                                int64_t ignore) {
  __shared__ double scratch[kMaxBlockThreads];
  const int64_t n = s.size;
  for (int64_t r = blockIdx.x; r < s.rows; r += gridDim.x) {
    if (target[r] == ignore) {
      if (threadIdx.x == 0) row_loss[r] = 0;
      continue;
    }
    const T* xr = x + r * n;
    double mx, lse;
    row_lse(xr, n, scratch, mx, lse);
    double sum_log_p = 0;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) sum_log_p += (double(xr[j]) - mx) - lse;
    sum_log_p = block_combine(sum_log_p, scratch, PlusOp{});
    if (threadIdx.x == 0) {
      const double target_log_p = (double(xr[target[r]]) - mx) - lse;
      row_loss[r] = -(eps / static_cast<double>(n) * sum_log_p + (1.0 - eps) * target_log_p);
    }
  }
}

// One block: live rows counted and row losses summed in row order (fixed tree).
// The loss (and its incoming gradient) is compute_type<T>: float32 for bfloat16 logits.
template <typename T, typename C = compute_type<T>>
__global__ void mean_loss_kernel(Rows s, C* loss, const double* row_loss, const int64_t* target, int64_t ignore,
                                 double* live_out) {
  __shared__ double scratch[kMaxBlockThreads];
  double total = 0, live = 0;
  for (int64_t r = threadIdx.x; r < s.rows; r += blockDim.x) {
    if (target[r] == ignore) continue;
    total += row_loss ? row_loss[r] : 0.0;
    live += 1;
  }
  total = block_combine(total, scratch, PlusOp{});
  live = block_combine(live, scratch, PlusOp{});
  if (threadIdx.x == 0) {
    if (loss) *loss = live == 0 ? C(0) : static_cast<C>(total / live);
    if (live_out) *live_out = live;
  }
}

template <typename T, typename C = compute_type<T>>
__global__ void cross_entropy_backward_kernel(Rows s, T* out, const T* x, const int64_t* target, const C* grad,
                                              const double* live, double eps, int64_t ignore) {
  __shared__ double scratch[kMaxBlockThreads];
  const int64_t n = s.size;
  const C scale = *live == 0 ? C(0) : static_cast<C>(static_cast<double>(*grad) / *live);
  for (int64_t r = blockIdx.x; r < s.rows; r += gridDim.x) {
    T* o = out + r * n;
    if (target[r] == ignore) {
      for (int64_t j = threadIdx.x; j < n; j += blockDim.x) o[j] = T(0);
      continue;
    }
    const T* xr = x + r * n;
    double mx, lse;
    row_lse(xr, n, scratch, mx, lse);
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
      const double p = exp(double(xr[j]) - mx - lse);
      const double target_weight = eps / static_cast<double>(n) + (j == target[r] ? 1.0 - eps : 0.0);
      o[j] = static_cast<T>(static_cast<C>(scale * (p - target_weight)));
    }
  }
}

}  // namespace

BadId find_bad_id(const int64_t* ids, int64_t n, int64_t limit, int64_t ignore, bool has_ignore, void* scratch,
                  cudaStream_t stream) {
  BadId bad;
  if (n == 0) return bad;
  // A captured step (loom/capture.h) cannot wait for the answer: there the ids go
  // unchecked on the device (a replay of a bad id reads out of range, as a CUDA graph
  // of any framework would; the stand-in's capture and every eager run check them).
  cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
  check_kernel_call(cudaStreamIsCapturing(stream, &capturing), "cudaStreamIsCapturing");
  if (capturing != cudaStreamCaptureStatusNone) return bad;
  auto* first = static_cast<unsigned long long*>(scratch);
  check_kernel_call(cudaMemsetAsync(first, 0xff, sizeof(unsigned long long), stream), "cudaMemsetAsync");
  bad_id_kernel<<<blocks_for(n), kThreads, 0, stream>>>(ids, n, limit, ignore, has_ignore, first);
  check_kernel_launch("bad_id_kernel");
  unsigned long long position = 0;
  check_kernel_call(cudaMemcpyAsync(&position, first, sizeof(position), cudaMemcpyDeviceToHost, stream),
                    "cudaMemcpyAsync");
  check_kernel_call(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  if (position == ~0ull) return bad;
  bad.position = static_cast<int64_t>(position);
  check_kernel_call(cudaMemcpy(&bad.id, ids + bad.position, sizeof(int64_t), cudaMemcpyDeviceToHost), "cudaMemcpy");
  return bad;
}

template <typename T>
void launch_cross_entropy(Rows s, void* loss, const void* logits, const int64_t* target, double smoothing,
                          int64_t ignore_index, double* row_loss, cudaStream_t stream) {
  if (s.rows > 0) {
    row_loss_kernel<T><<<row_blocks(s.rows), row_threads(s.size), 0, stream>>>(
        s, row_loss, static_cast<const T*>(logits), target, smoothing, ignore_index);
    check_kernel_launch("row_loss_kernel");
  }
  mean_loss_kernel<T><<<1, kMaxBlockThreads, 0, stream>>>(s, static_cast<compute_type<T>*>(loss), row_loss, target,
                                                          ignore_index, nullptr);
  check_kernel_launch("mean_loss_kernel");
}

template <typename T>
void launch_cross_entropy_backward(Rows s, void* out, const void* logits, const int64_t* target, const void* grad,
                                   double smoothing, int64_t ignore_index, double* live, cudaStream_t stream) {
  if (s.rows == 0 || s.size == 0) return;
  mean_loss_kernel<T><<<1, kMaxBlockThreads, 0, stream>>>(s, static_cast<compute_type<T>*>(nullptr), nullptr, target,
                                                          ignore_index, live);
  check_kernel_launch("mean_loss_kernel");
  cross_entropy_backward_kernel<T><<<row_blocks(s.rows), row_threads(s.size), 0, stream>>>(
      s, static_cast<T*>(out), static_cast<const T*>(logits), target, static_cast<const compute_type<T>*>(grad), live,
      smoothing, ignore_index);
  check_kernel_launch("cross_entropy_backward_kernel");
}

template void launch_cross_entropy<float>(Rows, void*, const void*, const int64_t*, double, int64_t, double*,
                                          cudaStream_t);
template void launch_cross_entropy<double>(Rows, void*, const void*, const int64_t*, double, int64_t, double*,
                                           cudaStream_t);
template void launch_cross_entropy_backward<float>(Rows, void*, const void*, const int64_t*, const void*, double,
                                                   int64_t, double*, cudaStream_t);
template void launch_cross_entropy<bfloat16>(Rows, void*, const void*, const int64_t*, double, int64_t, double*,
                                             cudaStream_t);
template void launch_cross_entropy_backward<bfloat16>(Rows, void*, const void*, const int64_t*, const void*, double,
                                                      int64_t, double*, cudaStream_t);
template void launch_cross_entropy_backward<double>(Rows, void*, const void*, const int64_t*, const void*, double,
                                                    int64_t, double*, cudaStream_t);

}  // namespace loom::cuda
