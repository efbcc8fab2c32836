#pragma once
// Dropout, the optimizer steps and the embedding on the GPU: the kernels a
// training step needs beside the elementwise, reduction and row kernels.
#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

namespace loom::cuda {

// out = keep ? x / (1 - p) : 0, keep_i = (word i % 4 of Philox block i / 4 at
// (seed, offset)) >> 8 >= ceil(p 2^24), the CPU's stream and test; mask gets
// the keep bits, bit i % 32 of word i / 32. x and out dense.
template <typename T>
void launch_dropout(void* out, uint32_t* mask, const void* x, int64_t n, double p, uint64_t seed, uint64_t offset,
                    cudaStream_t stream);
template <typename T>
void launch_dropout_backward(void* out, const void* grad, const uint32_t* mask, int64_t n, double p,
                             cudaStream_t stream);

// The CPU's update arithmetic (ops/cpu/updates.cpp), one element per thread; all dense.
struct AdamArgs {
  double beta1, beta2, eps, step_size, root_correction2, shrink, l2;
};
template <typename T>
void launch_adam_step(void* w, const void* grad, void* m, void* v, int64_t n, const AdamArgs& a, cudaStream_t stream);
struct SgdArgs {
  double lr, weight_decay, momentum, dampening;
  bool nesterov, first;
};
template <typename T>
void launch_sgd_step(void* w, const void* grad, void* buffer, int64_t n, const SgdArgs& a, cudaStream_t stream);

// out [n, dim] = weight rows at ids (weight strided: row_stride, col_stride).
template <typename T>
void launch_embedding(void* out, const void* weight, int64_t row_stride, int64_t col_stride, const int64_t* ids,
                      int64_t n, int64_t dim, cudaStream_t stream);
// out [vocab, dim] = per id, the sum of grad's rows ([n, dim]) in position order
// (the CPU's order and rounding: the first row, then the others added), 0 for
// ids with no rows and for padding_idx. Positions sorted by id with a stable
// radix sort (cub): deterministic, no atomics. scratch: embedding_backward_scratch_bytes(n).
size_t embedding_backward_scratch_bytes(int64_t n);
template <typename T>
void launch_embedding_backward(void* out, const void* grad, const int64_t* ids, int64_t n, int64_t vocab, int64_t dim,
                               int64_t padding_idx, void* scratch, size_t scratch_bytes, cudaStream_t stream);

// out[i] = i.
template <typename T>
void launch_arange(void* out, int64_t n, cudaStream_t stream);

}  // namespace loom::cuda
