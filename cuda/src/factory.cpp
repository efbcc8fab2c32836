// Registers arange for cuda (kernel: factory.cu).
#include "loom/kernel_table.h"
#include "loom/ops/kernel_signatures.h"
#include "factory_launch.h"
#include "tensor_args.h"

namespace loom::cuda {

namespace {

template <typename T>
void arange(const Tensor& out) {
  OnDevice on(out);
  launch_arange<T>(out.raw_data(), out.numel(), on.stream());
}

}  // namespace

LOOM_KERNELS(cuda_factory) {
  register_kernel<kernels::ArangeKernel>("arange", DeviceType::cuda, DType::f32, arange<float>);
  register_kernel<kernels::ArangeKernel>("arange", DeviceType::cuda, DType::f64, arange<double>);
  register_kernel<kernels::ArangeKernel>("arange", DeviceType::cuda, DType::i32, arange<int32_t>);
  register_kernel<kernels::ArangeKernel>("arange", DeviceType::cuda, DType::i64, arange<int64_t>);
}

}  // namespace loom::cuda
