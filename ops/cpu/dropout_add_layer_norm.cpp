// CPU kernels of dropout_add_layer_norm (ops/src/dropout_add_layer_norm.cpp): the
// residual sum h = x + dropout(s) in one pass (dropout's chunks of Philox words), then
// layer norm over h's rows while the residual sum is still in cache. Each half is the
// loop of the op it replaces, so the bits are dropout, add and layer_norm's.
#include "dropout_add_layer_norm.h"

#include "loom/kernel_table.h"
#include "type_lists.h"

namespace loom {

namespace {

template <typename T, bool kFast>
void dropout_add_layer_norm_kernel(const Tensor& out, const Tensor& h, const Tensor& stats, const Tensor& mask,
                                   const Tensor& x, const Tensor& s, const Tensor& weight, const Tensor& bias,
                                   kernels::DropoutDraw draw, double eps) {
  auto* words = reinterpret_cast<uint32_t*>(mask.data<int32_t>());
  (kFast ? detail::dropout_add_fast<T> : detail::dropout_add_reference<T>)(h.data<T>(), words, x.data<T>(), s.data<T>(),
                                                                           x.numel(), draw);
  using C = compute_type<T>;
  const detail::ParamData<T> w(weight), b(bias);
  (kFast ? detail::layer_norm_rows_fast<T> : detail::layer_norm_rows_reference<T>)(out.data<T>(), stats.data<C>(),
                                                                                   h.data<T>(), w.get(), b.get(),
                                                                                   detail::row_shape(h), eps);
}

}  // namespace

LOOM_KERNELS(cpu_dropout_add_layer_norm) {
  kernels::for_each_type(FloatingTypesBf16{}, [](auto tag) {
    using T = typename decltype(tag)::type;
    register_kernel<kernels::DropoutAddLayerNormKernel>("dropout_add_layer_norm", DeviceType::cpu, dtype_of<T>(),
                                                        dropout_add_layer_norm_kernel<T, true>,
                                                        dropout_add_layer_norm_kernel<T, false>);
  });
}

}  // namespace loom
