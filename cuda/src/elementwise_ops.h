#pragma once
// The elementwise ops the CUDA backend runs, one line each: the op's name in
// the kernel table, its functor (loom/kernels/functors.h, the CPU's math) and
// the element types it is compiled for. elementwise.cu turns each line into a
// kernel, elementwise.cpp into a registration: one list, no second copy.
#include "loom/cuda/launch.h"
#include "type_lists.h"

#include <cuda_runtime_api.h>

// The lists read as tables: clang-format leaves them as written.
// clang-format off
// X(name, functor, types): out = functor(x), out and x of one type.
#define LOOM_CUDA_UNARY_OPS(X)                                                                              \
  X(neg, Neg, Numeric) X(abs, Abs, Numeric) X(sign, Sign, Numeric) X(relu, Relu, Numeric) X(step, Step, Numeric) \
  X(clamp, Clamp, Numeric) X(clamp_mask, ClampMask, Floating) X(exp, Exp, Floating) X(log, Log, Floating)        \
  X(tanh, Tanh, Floating) X(sqrt, Sqrt, Floating) X(rsqrt, Rsqrt, Floating) X(sigmoid, Sigmoid, Floating)        \
  X(gelu_tanh, GeluTanh, Floating)                                                                              \
  X(softplus, Softplus, Floating) X(pow, PowScalar, Floating) X(gelu, Gelu, Floating)

// X(name, functor, types): out = functor(a, b) of one type.
#define LOOM_CUDA_BINARY_OPS(X)                                                                                 \
  X(add, Add, Numeric) X(sub, Sub, Numeric) X(mul, Mul, Numeric) X(div, Div, Numeric)                           \
  X(maximum, Maximum, Numeric) X(minimum, Minimum, Numeric) X(maximum_share, MaximumShare, Floating)             \
  X(minimum_share, MinimumShare, Floating) X(relu_backward, ReluBackward, Floating)                             \
  X(tanh_backward, TanhBackward, Numeric) X(sigmoid_backward, SigmoidBackward, Floating)                        \
  X(gelu_backward, GeluBackward, Floating) X(gelu_tanh_backward, GeluTanhBackward, Floating)

// X(name, functor, types): bool out = functor(a, b).
#define LOOM_CUDA_COMPARE_OPS(X) \
  X(eq, Eq, All) X(ne, Ne, All) X(lt, Lt, All) X(le, Le, All) X(gt, Gt, All) X(ge, Ge, All)
// clang-format on

namespace loom::cuda {

#define LOOM_CUDA_ENUMERATOR(name, functor, types) name,
enum class UnaryOp { LOOM_CUDA_UNARY_OPS(LOOM_CUDA_ENUMERATOR) };
enum class BinaryOp { LOOM_CUDA_BINARY_OPS(LOOM_CUDA_ENUMERATOR) LOOM_CUDA_COMPARE_OPS(LOOM_CUDA_ENUMERATOR) };
#undef LOOM_CUDA_ENUMERATOR

// Pointers are each operand's element 0; s walks all of them over out's shape.
template <typename T>
void launch_unary(UnaryOp op, const Strided<2>& s, void* out, const void* x, double a, double b, cudaStream_t stream);
template <typename T>
void launch_binary(BinaryOp op, const Strided<3>& s, void* out, const void* a, const void* b, cudaStream_t stream);
template <typename T>
void launch_where(const Strided<4>& s, void* out, const void* condition, const void* a, const void* b,
                  cudaStream_t stream);
// out (element type `to`) = x (From) converted.
template <typename From>
void launch_cast(ElementType to, const Strided<2>& s, void* out, const void* x, cudaStream_t stream);

}  // namespace loom::cuda
