// Registers sum, amax, amin, argmax, argmin, logsumexp, var and any_non_finite for cuda.
#include "loom/autograd.h"
#include "loom/kernel_table.h"
#include "loom/ops/kernel_signatures.h"
#include "reduce_launch.h"
#include "tensor_args.h"

namespace loom::cuda {

namespace {

// x viewed as [outputs (the kept dims, in order), reduced (dims)].
ReduceShape reduce_shape(std::string_view op, const Tensor& x, const Shape& dims) {
  LOOM_CHECK(x.dim() <= kMaxDims, "{}: the CUDA reductions take at most {} dims, got {}", op, kMaxDims, x.dim());
  ReduceShape s;
  for (int64_t d = 0; d < x.dim(); ++d) {
    const bool reduced = std::find(dims.begin(), dims.end(), d) != dims.end();
    if (reduced) {
      s.inner_sizes[s.inner_ndim] = x.size(d);
      s.inner_strides[s.inner_ndim++] = x.stride(d);
      s.reduced *= x.size(d);
    } else {
      s.outer_sizes[s.outer_ndim] = x.size(d);
      s.outer_strides[s.outer_ndim++] = x.stride(d);
      s.outputs *= x.size(d);
    }
  }
  return s;
}

template <Reduction R, typename T>
void reduce(const Tensor& out, const Tensor& x, const Shape& dims) {
  OnDevice on(out);
  launch_reduce<T>(R, reduce_shape("reduction", x, dims), out.raw_data(), x.raw_data(), 1.0, on.stream());
}

template <typename T>
void var(const Tensor& out, const Tensor& centred, const Shape& dims, double divisor) {
  OnDevice on(out);
  launch_reduce<T>(Reduction::square_sum, reduce_shape("var", centred, dims), out.raw_data(), centred.raw_data(),
                   divisor, on.stream());
}

template <typename T>
bool non_finite(const Tensor& x) {
  OnDevice on(x);
  Tensor found = Tensor::empty({1}, {DType::i32, x.device()});
  return any_non_finite<T>(strided<1>("any_non_finite", x.shape(), {x.strides()}), x.raw_data(), found.raw_data(),
                           on.stream());
}

template <Reduction R, typename... Ts>
void register_reduction(std::string_view op, TypeList<Ts...>) {
  (register_kernel<kernels::ReduceKernel>(op, DeviceType::cuda, dtype_of<Ts>(), reduce<R, Ts>), ...);
}

}  // namespace

LOOM_KERNELS(cuda_reductions) {
  register_reduction<Reduction::sum>("sum", NumericTypesBf16{});
  register_reduction<Reduction::amax>("amax", Numeric{});
  register_reduction<Reduction::amin>("amin", Numeric{});
  register_reduction<Reduction::argmax>("argmax", Numeric{});
  register_reduction<Reduction::argmin>("argmin", Numeric{});
  register_reduction<Reduction::logsumexp>("logsumexp", Floating{});
  register_kernel<kernels::VarKernel>("var", DeviceType::cuda, DType::f32, var<float>);
  register_kernel<kernels::VarKernel>("var", DeviceType::cuda, DType::f64, var<double>);
  register_kernel<NonFiniteKernel>("any_non_finite", DeviceType::cuda, DType::f32, non_finite<float>);
  register_kernel<NonFiniteKernel>("any_non_finite", DeviceType::cuda, DType::f64, non_finite<double>);
}

}  // namespace loom::cuda
