#pragma once
// The elementwise ops every backend runs, one line each: the op's name in the
// kernel table, its functor (functors.h: the math, for host and device) and the
// element types it has kernels for (on bfloat16 the functor computes in float32 and
// rounds once). ops/cpu/elementwise.cpp and the CUDA backend
// (cuda/src/elementwise_ops.h) make their kernels from these lines, so an
// elementwise op is its file in ops/src, its functor and one line here.
// Free of fmt and loom/dtype.h: nvcc compiles it.
#include "loom/type_list.h"

// The lists read as tables: clang-format leaves them as written.
// clang-format off
// X(name, functor, types): out = functor(x), out and x of one type.
#define LOOM_UNARY_OPS(X)                                                                                             \
  X(neg, Neg, NumericTypesBf16) X(abs, Abs, NumericTypesBf16) X(sign, Sign, NumericTypesBf16)                         \
  X(relu, Relu, NumericTypesBf16) X(step, Step, NumericTypesBf16) X(clamp, Clamp, NumericTypesBf16)                   \
  X(clamp_mask, ClampMask, FloatingTypesBf16) X(exp, Exp, FloatingTypesBf16) X(log, Log, FloatingTypesBf16)           \
  X(tanh, Tanh, FloatingTypesBf16) X(sqrt, Sqrt, FloatingTypesBf16) X(rsqrt, Rsqrt, FloatingTypesBf16)                \
  X(sigmoid, Sigmoid, FloatingTypesBf16) X(gelu_tanh, GeluTanh, FloatingTypesBf16)                                    \
  X(softplus, Softplus, FloatingTypesBf16) X(pow, PowScalar, FloatingTypesBf16) X(gelu, Gelu, FloatingTypesBf16)

// X(name, functor, types): out = functor(a, b) of one type.
#define LOOM_BINARY_OPS(X)                                                                                            \
  X(add, Add, NumericTypesBf16) X(sub, Sub, NumericTypesBf16) X(mul, Mul, NumericTypesBf16)                           \
  X(div, Div, FloatingTypesBf16) X(pow_tensor, Pow, FloatingTypesBf16)                                                \
  X(maximum, Maximum, NumericTypesBf16) X(minimum, Minimum, NumericTypesBf16)                                         \
  X(maximum_share, MaximumShare, FloatingTypesBf16) X(minimum_share, MinimumShare, FloatingTypesBf16)                 \
  X(relu_backward, ReluBackward, FloatingTypesBf16) X(tanh_backward, TanhBackward, NumericTypesBf16)                  \
  X(sigmoid_backward, SigmoidBackward, FloatingTypesBf16) X(gelu_backward, GeluBackward, FloatingTypesBf16)           \
  X(gelu_tanh_backward, GeluTanhBackward, FloatingTypesBf16)

// X(name, functor, types): bool out = functor(a, b).
#define LOOM_COMPARE_OPS(X)                                                                                           \
  X(eq, Eq, StorageTypes) X(ne, Ne, StorageTypes) X(lt, Lt, StorageTypes)                                             \
  X(le, Le, StorageTypes) X(gt, Gt, StorageTypes) X(ge, Ge, StorageTypes)
// clang-format on
