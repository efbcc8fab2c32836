#pragma once
// Errors from kernel launch code (.cu files, which include no fmt and no
// Tensor): each becomes a loom::Error naming the failing call.
#include <cuda_runtime_api.h>

namespace loom::cuda {

[[noreturn]] void fail_cuda(cudaError_t status, const char* call);
[[noreturn]] void fail_kernel(const char* message);
inline void check_kernel_call(cudaError_t status, const char* call) {
  if (status != cudaSuccess) fail_cuda(status, call);
}
// After a launch: a bad configuration or a missing kernel image for this GPU.
void check_kernel_launch(const char* kernel);

}  // namespace loom::cuda
