#pragma once
// flash_attention on the GPU (flash_attention.cu), registered by flash_attention.cpp.
#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

namespace loom::cuda {

// One call's operands (dense [B, T, D] rows), passed by value: the mask's element
// (b, i, j) is at offset + sum_d ((b unravelled over batch_size)_d * batch_stride_d)
// + i * row_stride + j * col_stride.
inline constexpr int kAttentionMaskDims = 8;
struct AttentionCall {
  const void *q, *k, *v;
  int64_t batches, queries, keys, depth, value_depth;
  double scale, dropout_p;
  uint64_t seed, offset;
  const uint64_t* offset_base;  // null, or a captured step's device word added to offset (dropout_launch.h)
  const void* mask;             // null: none
  bool additive;
  int batch_dims;
  int64_t batch_size[kAttentionMaskDims], batch_stride[kAttentionMaskDims];
  int64_t mask_offset, row_stride, col_stride;
};
// out [B, Tq, Dv], lse [B, Tq]: one thread per query row, an online softmax over the keys
// (the CPU's algorithm, not yet tiled in shared memory).
template <typename T>
void launch_attention(const AttentionCall& call, void* out, void* lse, cudaStream_t stream);
// dq (one thread per query row), then dk and dv (one thread per key row): no atomics.
// row_dot: scratch of B * Tq elements (grad_i . out_i).
template <typename T>
void launch_attention_backward(const AttentionCall& call, void* dq, void* dk, void* dv, const void* grad,
                               const void* out, const void* lse, void* row_dot, cudaStream_t stream);

}  // namespace loom::cuda
