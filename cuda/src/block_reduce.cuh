#pragma once
// Deterministic block-wide combines: every thread's value lands in shared
// memory and a fixed tree merges neighbours, so the result depends only on the
// block size, never on scheduling. No atomics.

namespace loom::cuda {

// The combine of `value` over the block (blockDim.x a power of two, at most
// kMaxBlockThreads), returned to every thread. `scratch` holds blockDim.x values.
template <typename T, typename Combine>
__device__ T block_combine(T value, T* scratch, Combine combine) {
  const unsigned t = threadIdx.x;
  scratch[t] = value;
  __syncthreads();
  for (unsigned stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (t < stride) scratch[t] = combine(scratch[t], scratch[t + stride]);
    __syncthreads();
  }
  T result = scratch[0];
  __syncthreads();  // scratch may be reused right after
  return result;
}

struct PlusOp {
  template <typename T> __device__ T operator()(T a, T b) const { return a + b; }
};
struct MaxOp {
  template <typename T> __device__ T operator()(T a, T b) const { return b > a ? b : a; }
};

inline constexpr int kMaxBlockThreads = 256;

// Threads for a block working on rows of n elements: a power of two from 32 to 256.
inline int row_threads(long long n) {
  int t = 32;
  while (t < kMaxBlockThreads && t < n) t *= 2;
  return t;
}

}  // namespace loom::cuda
