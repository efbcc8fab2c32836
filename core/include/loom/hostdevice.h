#pragma once
// LOOM_HD marks functions compiled for both host and device (CUDA) code, so the
// CPU path runs the same arithmetic the GPU runs.
#if defined(__CUDACC__)
#define LOOM_HD __host__ __device__ __forceinline__
#else
#define LOOM_HD inline
#endif
