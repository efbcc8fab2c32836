#pragma once
// The elementwise ops every backend runs, one line each: the op's name in the
// kernel table, its functor (functors.h: the math, for host and device) and the
// element types it has kernels for. ops/cpu/elementwise.cpp and the CUDA backend
// (cuda/src/elementwise_ops.h) make their kernels from these lines, so an
// elementwise op is its file in ops/src, its functor and one line here.
// Free of fmt and loom/dtype.h: nvcc compiles it.
#include "loom/type_list.h"

// The lists read as tables: clang-format leaves them as written.
// clang-format off
// X(name, functor, types): out = functor(x), out and x of one type.
#define LOOM_UNARY_OPS(X)                                                                                     \
  X(neg, Neg, NumericTypes) X(abs, Abs, NumericTypes) X(sign, Sign, NumericTypes) X(relu, Relu, NumericTypes)  \
  X(step, Step, NumericTypes) X(clamp, Clamp, NumericTypes) X(clamp_mask, ClampMask, FloatingTypes)            \
  X(exp, Exp, FloatingTypes) X(log, Log, FloatingTypes) X(tanh, Tanh, FloatingTypes)                           \
  X(sqrt, Sqrt, FloatingTypes) X(rsqrt, Rsqrt, FloatingTypes) X(sigmoid, Sigmoid, FloatingTypes)               \
  X(gelu_tanh, GeluTanh, FloatingTypes)                                                                        \
  X(softplus, Softplus, FloatingTypes) X(pow, PowScalar, FloatingTypes) X(gelu, Gelu, FloatingTypes)

// X(name, functor, types): out = functor(a, b) of one type.
#define LOOM_BINARY_OPS(X)                                                                                    \
  X(add, Add, NumericTypes) X(sub, Sub, NumericTypes) X(mul, Mul, NumericTypes) X(div, Div, FloatingTypes) X(pow_tensor, Pow, FloatingTypes)      \
  X(maximum, Maximum, NumericTypes) X(minimum, Minimum, NumericTypes)                                          \
  X(maximum_share, MaximumShare, FloatingTypes) X(minimum_share, MinimumShare, FloatingTypes)                  \
  X(relu_backward, ReluBackward, FloatingTypes) X(tanh_backward, TanhBackward, NumericTypes)                   \
  X(sigmoid_backward, SigmoidBackward, FloatingTypes) X(gelu_backward, GeluBackward, FloatingTypes)            \
  X(gelu_tanh_backward, GeluTanhBackward, FloatingTypes)

// X(name, functor, types): bool out = functor(a, b).
#define LOOM_COMPARE_OPS(X) \
  X(eq, Eq, AllTypes) X(ne, Ne, AllTypes) X(lt, Lt, AllTypes) X(le, Le, AllTypes) X(gt, Gt, AllTypes) X(ge, Ge, AllTypes)
// clang-format on
