// CPU kernel of linear_param_grads (ops/src/linear_param_grads.cpp), the reference
// CUDA's one-product kernel is tested against: dW by the matmul kernel and db by the
// sum kernel, each written in place into the flat result: the bits of matmul and
// sum_to, so a device running it (the stand-in) trains to the CPU's bits. linear's
// backward on the CPU does not call it: it would be the same work.
#include "loom/kernel_table.h"
#include "loom/ops/kernel_signatures.h"
#include "type_lists.h"

namespace loom {

namespace {

template <typename T>
void linear_param_grads(const Tensor& out, const Tensor& g, const Tensor& x) {
  const int64_t rows = g.size(0), n = g.size(1), k = x.size(1);
  const Tensor dw = Tensor::make_view(out, {n, k}, {k, 1}, out.offset());
  const Tensor db = Tensor::make_view(out, {n}, {1}, out.offset() + n * k);
  const Tensor g_t = Tensor::make_view(g, {n, rows}, {1, n}, g.offset());
  find_kernel<kernels::MatmulKernel>("matmul", out.device(), out.dtype())(dw, g_t, x);
  find_kernel<kernels::ReduceKernel>("sum", out.device(), out.dtype())(db, g, Shape{0});
}
}  // namespace

LOOM_KERNELS(cpu_linear_param_grads) {
  kernels::for_each_type(FloatingTypesBf16{}, [](auto tag) {
    using T = typename decltype(tag)::type;
    register_kernel<kernels::LinearParamGradsKernel>("linear_param_grads", DeviceType::cpu, dtype_of<T>(),
                                                     linear_param_grads<T>);
  });
}

}  // namespace loom
