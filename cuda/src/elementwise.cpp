// Registers the elementwise kernels (elementwise_ops.h lists them), where, and
// copy (dtype conversion between any views) for the cuda device.
#include "elementwise_ops.h"
#include "loom/kernel_table.h"
#include "loom/ops/kernel_signatures.h"
#include "tensor_args.h"

namespace loom::cuda {

namespace {

template <UnaryOp op, typename T>
void unary(const Tensor& out, const Tensor& x, const kernels::Scalars& scalars) {
  OnDevice on(out);
  launch_unary<T>(op, strided<2>("elementwise", out.shape(), {out.strides(), x.strides()}), out.raw_data(),
                  x.raw_data(), scalars.a, scalars.b, on.stream());
}

template <BinaryOp op, typename T>
void binary(const Tensor& out, const Tensor& a, const Tensor& b) {
  OnDevice on(out);
  Strided<3> s = strided<3>("elementwise", out.shape(),
                            {out.strides(), broadcast_strides(a, out.shape()), broadcast_strides(b, out.shape())});
  launch_binary<T>(op, s, out.raw_data(), a.raw_data(), b.raw_data(), on.stream());
}

template <typename T>
void where(const Tensor& out, const Tensor& condition, const Tensor& a, const Tensor& b) {
  OnDevice on(out);
  Strided<4> s = strided<4>("where", out.shape(),
                            {out.strides(), broadcast_strides(condition, out.shape()),
                             broadcast_strides(a, out.shape()), broadcast_strides(b, out.shape())});
  launch_where<T>(s, out.raw_data(), condition.raw_data(), a.raw_data(), b.raw_data(), on.stream());
}

template <typename From>
void copy(const Tensor& dst, const Tensor& src) {
  OnDevice on(dst);
  launch_cast<From>(element_type(dst.dtype()), strided<2>("copy", dst.shape(), {dst.strides(), src.strides()}),
                    dst.raw_data(), src.raw_data(), on.stream());
}

}  // namespace

void convert_into(const Tensor& to, const Tensor& from, cudaStream_t stream) {
  dispatch_element_type(element_type(from.dtype()), [&](auto tag) {
    launch_cast<typename decltype(tag)::type>(element_type(to.dtype()),
                                              strided<2>("copy", from.shape(), {to.strides(), from.strides()}),
                                              to.raw_data(), from.raw_data(), stream);
  });
}

Tensor widened(const Tensor& t, cudaStream_t stream) {
  if (!t.defined() || t.dtype() != DType::bf16) return t;
  if (t.is_contiguous()) {
    Tensor wide = Tensor::empty(t.shape(), {DType::f32, t.device()});
    convert_into(wide, t, stream);
    return wide;
  }
  const int64_t stored = static_cast<int64_t>(t.storage()->nbytes() / sizeof(bfloat16));
  Tensor base = Tensor::empty({stored}, {DType::f32, t.device()});
  convert_into(base, Tensor::make_view(t, {stored}, {1}, 0), stream);
  return Tensor::make_view(base, t.shape(), t.strides(), t.offset());
}

namespace {

template <UnaryOp op, typename... Ts>
void register_unary(std::string_view name, TypeList<Ts...>) {
  (register_kernel<kernels::UnaryKernel>(name, DeviceType::cuda, dtype_of<Ts>(), unary<op, Ts>), ...);
}
template <BinaryOp op, typename... Ts>
void register_binary(std::string_view name, TypeList<Ts...>) {
  (register_kernel<kernels::BinaryKernel>(name, DeviceType::cuda, dtype_of<Ts>(), binary<op, Ts>), ...);
}
template <typename... Ts>
void register_where_and_copy(TypeList<Ts...>) {
  (register_kernel<kernels::TernaryKernel>("where", DeviceType::cuda, dtype_of<Ts>(), where<Ts>), ...);
  (register_kernel<kernels::CopyKernel>("copy", DeviceType::cuda, dtype_of<Ts>(), copy<Ts>), ...);
}

}  // namespace

LOOM_KERNELS(cuda_elementwise) {
#define LOOM_CUDA_REGISTER(name, functor, types) register_unary<UnaryOp::name>(#name, types{});
  LOOM_UNARY_OPS(LOOM_CUDA_REGISTER)
#undef LOOM_CUDA_REGISTER
#define LOOM_CUDA_REGISTER(name, functor, types) register_binary<BinaryOp::name>(#name, types{});
  LOOM_BINARY_OPS(LOOM_CUDA_REGISTER)
  LOOM_COMPARE_OPS(LOOM_CUDA_REGISTER)
#undef LOOM_CUDA_REGISTER
  register_where_and_copy(StorageTypes{});
}

}  // namespace loom::cuda
