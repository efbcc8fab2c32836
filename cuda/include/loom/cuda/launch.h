#pragma once
// Launch configuration and strided indexing for the CUDA kernels, written as
// host/device functions without CUDA headers, so the CPU tests check them
// (tests/test_cuda_helpers.cpp) in builds that have no GPU.
#include <cstdint>

#include "loom/hostdevice.h"

namespace loom::cuda {

// Dims after coalescing (loom::kernels::make_loop merges contiguous dims):
// more than this is refused with an Error naming the op.
inline constexpr int kMaxDims = 8;
inline constexpr int kThreads = 256;              // threads per block of the elementwise kernels
inline constexpr int64_t kMaxBlocks = 65535 * 8;  // grid-stride loops cover the rest

// Blocks for n elements, `per_thread` each, capped (grid-stride loops go on from there).
LOOM_HD int64_t blocks_for(int64_t n, int threads = kThreads, int64_t per_thread = 1) {
  if (n <= 0) return 1;
  int64_t per_block = threads * per_thread;
  int64_t blocks = (n + per_block - 1) / per_block;
  return blocks < kMaxBlocks ? blocks : kMaxBlocks;
}

// N operands walked over one (coalesced) shape: operand k's element at logical
// index i lives at sum_d index_d * strides[k][d] (elements, from its base pointer).
template <int N>
struct Strided {
  int ndim = 1;
  int64_t numel = 0;
  bool contiguous = true;  // every operand dense in the same order: offset == i
  int64_t sizes[kMaxDims] = {};
  int64_t strides[N][kMaxDims] = {};
};

// The element offsets of logical index i for every operand (innermost dim fastest).
template <int N>
LOOM_HD void strided_offsets(const Strided<N>& s, int64_t i, int64_t (&offsets)[N]) {
  for (int k = 0; k < N; ++k) offsets[k] = 0;
  if (s.contiguous) {
    for (int k = 0; k < N; ++k) offsets[k] = i;
    return;
  }
  for (int d = s.ndim - 1; d >= 0; --d) {
    const int64_t index = i % s.sizes[d];
    i /= s.sizes[d];
    for (int k = 0; k < N; ++k) offsets[k] += index * s.strides[k][d];
  }
}

// A reduction viewed as [outputs, reduced]: output o and reduced element r of x
// live at outer offset(o) + inner offset(r), each a strided walk of its own dims.
struct ReduceShape {
  int outer_ndim = 0, inner_ndim = 0;
  int64_t outputs = 1, reduced = 1;
  int64_t outer_sizes[kMaxDims] = {}, outer_strides[kMaxDims] = {};
  int64_t inner_sizes[kMaxDims] = {}, inner_strides[kMaxDims] = {};
};

LOOM_HD int64_t walk_offset(int64_t i, int ndim, const int64_t* sizes, const int64_t* strides) {
  int64_t offset = 0;
  for (int d = ndim - 1; d >= 0; --d) {
    offset += (i % sizes[d]) * strides[d];
    i /= sizes[d];
  }
  return offset;
}

// Philox: element i draws word i % 4 of block i / 4 (the CPU's layout); a thread
// handling one block writes elements [4 * block, 4 * block + 4).
LOOM_HD uint64_t philox_block_of(int64_t element) { return static_cast<uint64_t>(element / 4); }

// Deterministic segmented sums (embedding, index_add, scatter_add backward): the
// positions sorted by target id; segment s covers order[starts[s], starts[s + 1]).
// first_in_segment(ids_sorted, p): whether position p starts a new segment.
LOOM_HD bool first_in_segment(const int64_t* sorted_ids, int64_t p) {
  return p == 0 || sorted_ids[p] != sorted_ids[p - 1];
}

}  // namespace loom::cuda
