// Layer norm forward and backward: one block per row for the row statistics
// and dx; dw and db summed down the columns in a fixed order (double
// accumulators), so the bits never depend on scheduling.
#include <cmath>
#include <cstdint>

#include "block_reduce.cuh"
#include "loom/bfloat16.h"
#include "kernel_errors.h"
#include "rows_launch.h"

namespace loom::cuda {

namespace {

int64_t row_blocks(int64_t rows) { return rows < kMaxBlocks ? (rows > 0 ? rows : 1) : kMaxBlocks; }

// (mean, rstd) of row r in C, as the CPU's fast kernel computes them: the mean
// of x in double, rounded to C; the centred squares in C summed in double.
// C = compute_type<T>: bfloat16 values are computed on in float32 (statistics,
// weight, bias and dw/db in float32), each stored result rounded once, as on the CPU.
template <typename T, typename C>
__device__ void row_stats(const T* xr, int64_t n, double eps, double* scratch, C& mean, C& rstd) {
  double sum = 0;
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) sum += C(xr[j]);
  mean = static_cast<C>(block_combine(sum, scratch, PlusOp{}) / static_cast<double>(n));
  double squares = 0;
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
    const C d = C(xr[j]) - mean;
    squares += d * d;
  }
  squares = block_combine(squares, scratch, PlusOp{});
  rstd = static_cast<C>(1.0 / sqrt(squares / static_cast<double>(n) + eps));
}

template <typename T, typename C = compute_type<T>>
__global__ void layer_norm_kernel(Rows s, T* out, C* stats, const T* x, const C* w, const C* b, double eps) {
  __shared__ double scratch[kMaxBlockThreads];
  const int64_t n = s.size;
  for (int64_t r = blockIdx.x; r < s.rows; r += gridDim.x) {
    const T* xr = x + r * n;
    C mean, rstd;
    row_stats(xr, n, eps, scratch, mean, rstd);
    if (threadIdx.x == 0) {
      stats[2 * r] = mean;
      stats[2 * r + 1] = rstd;
    }
    if (!out) continue;  // statistics only (the backward without saved ones)
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
      C y = (C(xr[j]) - mean) * rstd;
      if (w) y = y * w[j];
      if (b) y = y + b[j];
      out[r * n + j] = T(y);
    }
  }
}

// dx = rstd (g w - mean(g w) - xh mean(g w xh)), xh = (x - mean) rstd.
template <typename T, typename C = compute_type<T>>
__global__ void layer_norm_dx_kernel(Rows s, T* dx, const T* x, const C* w, const T* g, const C* stats) {
  __shared__ double scratch[kMaxBlockThreads];
  const int64_t n = s.size;
  for (int64_t r = blockIdx.x; r < s.rows; r += gridDim.x) {
    const T* xr = x + r * n;
    const T* gr = g + r * n;
    const C mean = stats[2 * r], rstd = stats[2 * r + 1];
    double sum_a = 0, sum_axh = 0;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
      const C a = C(gr[j]) * (w ? w[j] : C(1));
      sum_a += a;
      sum_axh += a * ((C(xr[j]) - mean) * rstd);
    }
    const C mean_a = static_cast<C>(block_combine(sum_a, scratch, PlusOp{}) / static_cast<double>(n));
    const C mean_axh = static_cast<C>(block_combine(sum_axh, scratch, PlusOp{}) / static_cast<double>(n));
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
      const C xh = (C(xr[j]) - mean) * rstd;
      dx[r * n + j] = T(rstd * (C(gr[j]) * (w ? w[j] : C(1)) - mean_a - xh * mean_axh));
    }
  }
}

// params[j] = sum over rows of g xh (dw), params[n + j] = sum of g (db). A block
// takes kColumnTile columns; its kRowLanes lanes sum rows lane, lane + kRowLanes, ...
// in order, and lane 0 adds the lanes in order: coalesced reads and many threads per
// column (one thread per column over every row took 0.3 ms for 1536 x 512 on an
// H100), with bits that never depend on scheduling (double sums in a fixed order).
constexpr int kColumnTile = 32, kRowLanes = 32;

template <typename T, typename C = compute_type<T>>
__global__ void layer_norm_params_kernel(Rows s, T* params, const T* x, const T* g, const C* stats) {
  __shared__ double dw_lanes[kRowLanes][kColumnTile + 1], db_lanes[kRowLanes][kColumnTile + 1];
  const int64_t n = s.size;
  for (int64_t tile = blockIdx.x * int64_t(kColumnTile); tile < n; tile += int64_t(gridDim.x) * kColumnTile) {
    const int64_t j = tile + threadIdx.x;
    double dw = 0, db = 0;
    if (j < n) {
      for (int64_t r = threadIdx.y; r < s.rows; r += kRowLanes) {
        const C gj = C(g[r * n + j]);
        dw += gj * ((C(x[r * n + j]) - stats[2 * r]) * stats[2 * r + 1]);
        db += gj;
      }
    }
    dw_lanes[threadIdx.y][threadIdx.x] = dw;
    db_lanes[threadIdx.y][threadIdx.x] = db;
    __syncthreads();
    if (threadIdx.y == 0 && j < n) {
      double dw_sum = 0, db_sum = 0;
      for (int lane = 0; lane < kRowLanes; ++lane) {
        dw_sum += dw_lanes[lane][threadIdx.x];
        db_sum += db_lanes[lane][threadIdx.x];
      }
      params[j] = static_cast<T>(dw_sum);
      params[n + j] = static_cast<T>(db_sum);
    }
    __syncthreads();  // the lanes' shared sums are read before the next tile writes them
  }
}

}  // namespace

template <typename T>
void launch_layer_norm(Rows s, void* out, void* stats, const void* x, const void* weight, const void* bias, double eps,
                       cudaStream_t stream) {
  if (s.rows == 0 || s.size == 0) return;
  using C = compute_type<T>;
  layer_norm_kernel<T><<<row_blocks(s.rows), row_threads(s.size), 0, stream>>>(
      s, static_cast<T*>(out), static_cast<C*>(stats), static_cast<const T*>(x), static_cast<const C*>(weight),
      static_cast<const C*>(bias), eps);
  check_kernel_launch("layer_norm_kernel");
}

template <typename T>
void launch_layer_norm_backward(Rows s, void* dx, void* params, const void* x, const void* weight, const void* grad,
                                const void* stats, double eps, cudaStream_t stream) {
  if (s.rows == 0 || s.size == 0) {
    if (params) check_kernel_call(cudaMemsetAsync(params, 0, 2 * s.size * sizeof(T), stream), "cudaMemsetAsync");
    return;
  }
  using C = compute_type<T>;
  if (dx) {
    layer_norm_dx_kernel<T><<<row_blocks(s.rows), row_threads(s.size), 0, stream>>>(
        s, static_cast<T*>(dx), static_cast<const T*>(x), static_cast<const C*>(weight), static_cast<const T*>(grad),
        static_cast<const C*>(stats));
    check_kernel_launch("layer_norm_dx_kernel");
  }
  if (params) {
    const int64_t tiles = (s.size + kColumnTile - 1) / kColumnTile;
    const int64_t blocks = tiles < kMaxBlocks ? tiles : kMaxBlocks;
    layer_norm_params_kernel<T><<<blocks, dim3(kColumnTile, kRowLanes), 0, stream>>>(
        s, static_cast<T*>(params), static_cast<const T*>(x), static_cast<const T*>(grad),
        static_cast<const C*>(stats));
    check_kernel_launch("layer_norm_params_kernel");
  }
}

template void launch_layer_norm<float>(Rows, void*, void*, const void*, const void*, const void*, double, cudaStream_t);
template void launch_layer_norm<double>(Rows, void*, void*, const void*, const void*, const void*, double,
                                        cudaStream_t);
template void launch_layer_norm_backward<float>(Rows, void*, void*, const void*, const void*, const void*, const void*,
                                                double, cudaStream_t);
template void launch_layer_norm<bfloat16>(Rows, void*, void*, const void*, const void*, const void*, double,
                                          cudaStream_t);
template void launch_layer_norm_backward<bfloat16>(Rows, void*, void*, const void*, const void*, const void*,
                                                   const void*, double, cudaStream_t);
template void launch_layer_norm_backward<double>(Rows, void*, void*, const void*, const void*, const void*, const void*,
                                                 double, cudaStream_t);

}  // namespace loom::cuda
