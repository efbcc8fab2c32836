#pragma once
// The embedding on the GPU (embedding.cu), registered by embedding.cpp.
#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

namespace loom::cuda {

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

}  // namespace loom::cuda
