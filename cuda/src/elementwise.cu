// The elementwise kernels: one grid-stride loop per arity, the math from the
// functors the CPU runs (loom/kernels/functors.h), strided operands walked by
// loom/cuda/launch.h's strided_offsets (dense operands skip the walk).
#include <type_traits>

#include "elementwise_ops.h"
#include "kernel_errors.h"
#include "loom/kernels/functors.h"

namespace loom::cuda {

namespace {

template <typename Out, typename A, typename F>
__global__ void unary_kernel(Strided<2> s, Out* out, const A* x, F f) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < s.numel; i += int64_t(gridDim.x) * blockDim.x) {
    int64_t off[2];
    strided_offsets(s, i, off);
    out[off[0]] = f(x[off[1]]);
  }
}

template <typename Out, typename A, typename F>
__global__ void binary_kernel(Strided<3> s, Out* out, const A* a, const A* b, F f) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < s.numel; i += int64_t(gridDim.x) * blockDim.x) {
    int64_t off[3];
    strided_offsets(s, i, off);
    out[off[0]] = f(a[off[1]], b[off[2]]);
  }
}

template <typename T>
__global__ void where_kernel(Strided<4> s, T* out, const bool* condition, const T* a, const T* b) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < s.numel; i += int64_t(gridDim.x) * blockDim.x) {
    int64_t off[4];
    strided_offsets(s, i, off);
    out[off[0]] = fn::Select{}(condition[off[1]], a[off[2]], b[off[3]]);
  }
}

// A functor with its scalar attributes (pow's exponent, clamp's bounds) filled in.
template <typename F>
F with_scalars(double a, double b) {
  if constexpr (std::is_constructible_v<F, double, double>)
    return F{a, b};
  else if constexpr (std::is_constructible_v<F, double>)
    return F{a};
  else
    return F{};
}

template <typename Out, typename A, typename F>
void run_unary(const Strided<2>& s, void* out, const void* x, F f, cudaStream_t stream) {
  if (s.numel == 0) return;
  unary_kernel<<<blocks_for(s.numel), kThreads, 0, stream>>>(s, static_cast<Out*>(out), static_cast<const A*>(x), f);
  check_kernel_launch("unary_kernel");
}

template <typename Out, typename A, typename F>
void run_binary(const Strided<3>& s, void* out, const void* a, const void* b, F f, cudaStream_t stream) {
  if (s.numel == 0) return;
  binary_kernel<<<blocks_for(s.numel), kThreads, 0, stream>>>(s, static_cast<Out*>(out), static_cast<const A*>(a),
                                                              static_cast<const A*>(b), f);
  check_kernel_launch("binary_kernel");
}

}  // namespace

template <typename T>
void launch_unary(UnaryOp op, const Strided<2>& s, void* out, const void* x, double a, double b, cudaStream_t stream) {
  switch (op) {
#define LOOM_CUDA_CASE(name, functor, types)                                                       \
  case UnaryOp::name:                                                                              \
    if constexpr (contains<T>(types{}))                                                            \
      return run_unary<T, T>(s, out, x, fn::math_for<T>(with_scalars<fn::functor>(a, b)), stream); \
    break;
    LOOM_UNARY_OPS(LOOM_CUDA_CASE)
#undef LOOM_CUDA_CASE
  }
  fail_kernel("an elementwise op was launched for an element type it is not compiled for");
}

template <typename T>
void launch_binary(BinaryOp op, const Strided<3>& s, void* out, const void* a, const void* b, cudaStream_t stream) {
  switch (op) {
#define LOOM_CUDA_CASE(name, functor, types)                                                                           \
  case BinaryOp::name:                                                                                                 \
    if constexpr (contains<T>(types{})) return run_binary<T, T>(s, out, a, b, fn::math_for<T>(fn::functor{}), stream); \
    break;
    LOOM_BINARY_OPS(LOOM_CUDA_CASE)
#undef LOOM_CUDA_CASE
#define LOOM_CUDA_CASE(name, functor, types)                                            \
  case BinaryOp::name:                                                                  \
    if constexpr (contains<T>(types{}))                                                 \
      return run_binary<bool, T>(s, out, a, b, fn::math_for<T>(fn::functor{}), stream); \
    break;
    LOOM_COMPARE_OPS(LOOM_CUDA_CASE)
#undef LOOM_CUDA_CASE
  }
  fail_kernel("an elementwise op was launched for an element type it is not compiled for");
}

template <typename T>
void launch_where(const Strided<4>& s, void* out, const void* condition, const void* a, const void* b,
                  cudaStream_t stream) {
  if (s.numel == 0) return;
  where_kernel<<<blocks_for(s.numel), kThreads, 0, stream>>>(
      s, static_cast<T*>(out), static_cast<const bool*>(condition), static_cast<const T*>(a), static_cast<const T*>(b));
  check_kernel_launch("where_kernel");
}

template <typename From>
void launch_cast(ElementType to, const Strided<2>& s, void* out, const void* x, cudaStream_t stream) {
  dispatch_element_type(to, [&](auto tag) {
    using To = typename decltype(tag)::type;
    run_unary<To, From>(s, out, x, fn::Cast<To>{}, stream);
  });
}

#define LOOM_CUDA_INSTANTIATE(T)                                                                                \
  template void launch_unary<T>(UnaryOp, const Strided<2>&, void*, const void*, double, double, cudaStream_t);  \
  template void launch_binary<T>(BinaryOp, const Strided<3>&, void*, const void*, const void*, cudaStream_t);   \
  template void launch_where<T>(const Strided<4>&, void*, const void*, const void*, const void*, cudaStream_t); \
  template void launch_cast<T>(ElementType, const Strided<2>&, void*, const void*, cudaStream_t);
LOOM_CUDA_FOR_EACH_TYPE(LOOM_CUDA_INSTANTIATE)
LOOM_CUDA_INSTANTIATE(bfloat16)
#undef LOOM_CUDA_INSTANTIATE

}  // namespace loom::cuda
