#pragma once
// The CUDA runtime as the backend uses it: every call checked (a failure is a
// loom::Error naming the call), one stream and one cuBLAS and one cuBLASLt handle per device.
// Included by host code only (.cpp); kernels (.cu) get a cudaStream_t.
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "loom/cuda.h"
#include "loom/device.h"

#include "kernel_errors.h"

namespace loom::cuda {

[[noreturn]] void fail_cublas(cublasStatus_t status, const char* call);

}  // namespace loom::cuda

// LOOM_CUDA_CHECK(cudaMalloc(&p, n)): a loom::Error "cuda: cudaMalloc(&p, n) failed: out of memory".
#define LOOM_CUDA_CHECK(call)                                                                \
  do {                                                                                       \
    cudaError_t loom_cuda_status_ = (call);                                                  \
    if (loom_cuda_status_ != cudaSuccess) ::loom::cuda::fail_cuda(loom_cuda_status_, #call); \
  } while (0)
#define LOOM_CUBLAS_CHECK(call)                                                                              \
  do {                                                                                                       \
    cublasStatus_t loom_cublas_status_ = (call);                                                             \
    if (loom_cublas_status_ != CUBLAS_STATUS_SUCCESS) ::loom::cuda::fail_cublas(loom_cublas_status_, #call); \
  } while (0)

namespace loom::cuda {

// Makes `device` current for the calling thread until destroyed.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = 0;
};

// The device's one stream (created on first use): every kernel, copy and fill
// of that device runs on it, in issue order.
cudaStream_t stream(int device);
// The device's cuBLAS handle, bound to its stream.
cublasHandle_t cublas(int device);
// The device's cuBLASLt handle (products with epilogues: gemm_epilogue.h) and the
// workspace its products may use (allocated once, on first use, never freed).
cublasLtHandle_t cublas_lt(int device);
struct Workspace {
  void* data = nullptr;
  size_t bytes = 0;
};
Workspace lt_workspace(int device);

// Captured steps (loom/capture.h) on the device's stream. The random kernels add the
// device word captured_random_base to the offsets they were launched with: null when
// the stream is not capturing, so eager launches read nothing; each replay sets the
// word first (set_captured_random_base, a fill on the stream), so it draws new masks.
bool stream_capturing(int device);
const uint64_t* captured_random_base(int device);
void set_captured_random_base(int device, uint64_t offset);

}  // namespace loom::cuda
