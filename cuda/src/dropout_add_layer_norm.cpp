// Registers dropout_add_layer_norm for cuda: dropout's kernel writing the residual sum
// h = x + dropout(s), then layer norm's kernel over h (dropout.cu, layer_norm.cu): two
// launches where dropout, add and layer_norm take three, the same bits as those three.
#include "loom/kernel_table.h"
#include "loom/ops/kernel_signatures.h"
#include "dropout_launch.h"
#include "rows_launch.h"
#include "tensor_args.h"

namespace loom::cuda {

namespace {

template <typename T>
void dropout_add_layer_norm(const Tensor& out, const Tensor& h, const Tensor& stats, const Tensor& mask,
                            const Tensor& x, const Tensor& s, const Tensor& weight, const Tensor& bias,
                            kernels::DropoutDraw draw, double eps) {
  OnDevice on(out);
  launch_dropout<T>(h.raw_data(), static_cast<uint32_t*>(mask.raw_data()), s.raw_data(), x.raw_data(), x.numel(),
                    draw.p, draw.seed, draw.offset, captured_random_base(out.device().index), /*relu=*/false,
                    on.stream());
  launch_layer_norm<T>(rows_of(h), out.raw_data(), stats.raw_data(), h.raw_data(),
                       data_or_null(widened(weight, on.stream())), data_or_null(widened(bias, on.stream())), eps,
                       on.stream());
}

}  // namespace

LOOM_KERNELS(cuda_dropout_add_layer_norm) {
  register_kernel<kernels::DropoutAddLayerNormKernel>("dropout_add_layer_norm", DeviceType::cuda, DType::f32,
                                                      dropout_add_layer_norm<float>);
  register_kernel<kernels::DropoutAddLayerNormKernel>("dropout_add_layer_norm", DeviceType::cuda, DType::f64,
                                                      dropout_add_layer_norm<double>);
  register_kernel<kernels::DropoutAddLayerNormKernel>("dropout_add_layer_norm", DeviceType::cuda, DType::bf16,
                                                      dropout_add_layer_norm<bfloat16>);
}

}  // namespace loom::cuda
