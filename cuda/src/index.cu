#include <cstdint>

#include "index_launch.h"
#include "kernel_errors.h"
#include "type_lists.h"

namespace loom::cuda {

namespace {

template <typename T>
__global__ void triangle_kernel(Box b, T* out, const T* x, bool upper, int64_t diagonal) {
  const int64_t rows = b.ndim >= 2 ? b.sizes[b.ndim - 2] : 1, cols = b.sizes[b.ndim - 1];
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < b.numel; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t col = i % cols, row = (i / cols) % rows;
    const bool keep = upper ? col - row >= diagonal : col - row <= diagonal;
    out[i] = keep ? x[walk_offset(i, b.ndim, b.sizes, b.x_strides)] : T(0);
  }
}

template <typename T>
__global__ void index_read_kernel(Box b, T* out, const T* x, const int64_t* index, int dim, bool per_element) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < b.numel; i += int64_t(gridDim.x) * blockDim.x) {
    int64_t rest = i, offset = 0;
    for (int d = b.ndim - 1; d >= 0; --d) {
      int64_t c = rest % b.sizes[d];
      rest /= b.sizes[d];
      if (d == dim) c = per_element ? index[i] : index[c];
      offset += c * b.x_strides[d];
    }
    out[i] = x[offset];
  }
}

template <typename T>
__global__ void index_accumulate_kernel(AccumulateBox b, T* out, const T* src, const int64_t* index, bool per_element) {
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < b.work; e += int64_t(gridDim.x) * blockDim.x) {
    int64_t rest = e, out_offset = 0, src_base = 0, target = 0;
    for (int d = b.ndim - 1; d >= 0; --d) {
      const int64_t c = rest % b.sizes[d];
      rest /= b.sizes[d];
      out_offset += c * b.out_strides[d];
      if (d == b.dim)
        target = c;
      else
        src_base += c * b.src_strides[d];
    }
    T acc = out[out_offset];
    for (int64_t k = 0; k < b.positions; ++k) {
      const int64_t at = src_base + k * b.src_strides[b.dim];
      if ((per_element ? index[at] : index[k]) == target) acc += src[at];
    }
    out[out_offset] = acc;
  }
}

}  // namespace

template <typename T>
void launch_index_accumulate(bool per_element, const AccumulateBox& box, void* out, const void* src,
                             const int64_t* index, cudaStream_t stream) {
  if (box.work == 0) return;
  index_accumulate_kernel<T><<<blocks_for(box.work), kThreads, 0, stream>>>(
      box, static_cast<T*>(out), static_cast<const T*>(src), index, per_element);
  check_kernel_launch("index_accumulate_kernel");
}

template <typename T>
void launch_triangle(bool upper, int64_t diagonal, const Box& box, void* out, const void* x, cudaStream_t stream) {
  if (box.numel == 0) return;
  triangle_kernel<T><<<blocks_for(box.numel), kThreads, 0, stream>>>(box, static_cast<T*>(out),
                                                                     static_cast<const T*>(x), upper, diagonal);
  check_kernel_launch("triangle_kernel");
}

template <typename T>
void launch_index_read(bool per_element, int dim, const Box& box, void* out, const void* x, const int64_t* index,
                       cudaStream_t stream) {
  if (box.numel == 0) return;
  index_read_kernel<T><<<blocks_for(box.numel), kThreads, 0, stream>>>(
      box, static_cast<T*>(out), static_cast<const T*>(x), index, dim, per_element);
  check_kernel_launch("index_read_kernel");
}

#define LOOM_CUDA_INSTANTIATE(T)                                                                 \
  template void launch_triangle<T>(bool, int64_t, const Box&, void*, const void*, cudaStream_t); \
  template void launch_index_read<T>(bool, int, const Box&, void*, const void*, const int64_t*, cudaStream_t);
LOOM_CUDA_FOR_EACH_TYPE(LOOM_CUDA_INSTANTIATE)
#undef LOOM_CUDA_INSTANTIATE
template void launch_index_accumulate<float>(bool, const AccumulateBox&, void*, const void*, const int64_t*,
                                             cudaStream_t);
template void launch_index_accumulate<double>(bool, const AccumulateBox&, void*, const void*, const int64_t*,
                                              cudaStream_t);
template void launch_index_accumulate<int32_t>(bool, const AccumulateBox&, void*, const void*, const int64_t*,
                                               cudaStream_t);
template void launch_index_accumulate<int64_t>(bool, const AccumulateBox&, void*, const void*, const int64_t*,
                                               cudaStream_t);

}  // namespace loom::cuda
