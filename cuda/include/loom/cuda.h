#pragma once
// The CUDA backend's few public switches. Linking loom_cuda (loom::loom does
// when the build has it) registers the cuda Backend and kernels at load time;
// tensors reach the GPU with Tensor::to(Device::cuda(i)).
namespace loom::cuda {

// GPUs visible to this process; 0 on any error (a machine with the toolkit
// but no driver says "driver version is insufficient").
int device_count();

// TF32 tensor-core math for float32 matmuls: off by default (float32 results
// then match the CPU's within float32 rounding); LOOM_CUDA_TF32=1 turns it on.
bool tf32_enabled();
void set_tf32_enabled(bool enabled);

}  // namespace loom::cuda
