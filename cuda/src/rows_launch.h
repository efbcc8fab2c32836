#pragma once
// The fused row kernels on the GPU: softmax and log_softmax (with masks) and
// their backward, layer norm forward and backward, label-smoothed
// cross-entropy. One block per row; row sums in double through a fixed tree
// (block_reduce.cuh), like the CPU's double row sums.
#include <cuda_runtime_api.h>

#include "loom/cuda/launch.h"

namespace loom::cuda {

// A mask read in place as broadcast to x's shape: row r starts at
// walk_offset(r, outer dims) and steps by `step` along the row.
struct RowMaskArgs {
  enum Kind { none, additive, boolean } kind = none;
  const void* data = nullptr;
  int outer_ndim = 0;
  int64_t outer_sizes[kMaxDims] = {}, outer_strides[kMaxDims] = {};
  int64_t step = 0;
};

struct Rows {
  int64_t rows = 0, size = 0;  // dense [rows, size]
};

template <typename T>
void launch_softmax(bool log, Rows s, void* out, const void* x, const RowMaskArgs& mask, cudaStream_t stream);
template <typename T>
void launch_softmax_backward(bool log, Rows s, void* out, const void* y, const void* grad, cudaStream_t stream);

// stats: [rows, 2] (mean, rstd); weight and bias may be null.
template <typename T>
void launch_layer_norm(Rows s, void* out, void* stats, const void* x, const void* weight, const void* bias, double eps,
                       cudaStream_t stream);
// dx (may be null) per row; params ([2, size]: dw then db; may be null) summed
// over rows in row order per column. stats: the forward's (launch_layer_norm
// with out null computes them alone).
template <typename T>
void launch_layer_norm_backward(Rows s, void* dx, void* params, const void* x, const void* weight, const void* grad,
                                const void* stats, double eps, cudaStream_t stream);

// The first position whose id is neither in [0, limit) nor `ignore` (when
// has_ignore), -1 when all are good, and that id; waits for the answer.
// scratch: 8 bytes of device memory.
struct BadId {
  int64_t position = -1, id = 0;
};
BadId find_bad_id(const int64_t* ids, int64_t n, int64_t limit, int64_t ignore, bool has_ignore, void* scratch,
                  cudaStream_t stream);

// loss (one T) = mean over live rows of the smoothed row loss (0 with none).
// row_loss: scratch for rows doubles.
template <typename T>
void launch_cross_entropy(Rows s, void* loss, const void* logits, const int64_t* target, double smoothing,
                          int64_t ignore_index, double* row_loss, cudaStream_t stream);
// out = (g / live rows) * (softmax - smoothed target) per live row, 0 on ignored
// rows. live: scratch for one double.
template <typename T>
void launch_cross_entropy_backward(Rows s, void* out, const void* logits, const int64_t* target, const void* grad,
                                   double smoothing, int64_t ignore_index, double* live, cudaStream_t stream);

}  // namespace loom::cuda
