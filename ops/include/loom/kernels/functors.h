#pragma once
// The math of elementwise ops, written once as small functors callable from host
// and device code: the CPU kernels run exactly the arithmetic CUDA will run.
#include <cmath>

#include <type_traits>

#include "loom/hostdevice.h"
#include "loom/kernels/vec_math.h"

namespace loom::fn {

struct Add { template <typename T> LOOM_HD T operator()(T a, T b) const { return a + b; } };
struct Sub { template <typename T> LOOM_HD T operator()(T a, T b) const { return a - b; } };
struct Mul { template <typename T> LOOM_HD T operator()(T a, T b) const { return a * b; } };
struct Div { template <typename T> LOOM_HD T operator()(T a, T b) const { return a / b; } };
struct Neg { template <typename T> LOOM_HD T operator()(T a) const { return -a; } };
// float32 takes the vectorizable exp (kernels/vec_math.h); float64 takes libm's.
struct Exp {
  template <typename T> LOOM_HD T operator()(T a) const {
#if !defined(__CUDA_ARCH__)
    if constexpr (std::is_same_v<T, float>) return kernels::exp_float(a);
#endif
    using std::exp;
    return exp(a);
  }
};
struct Log { template <typename T> LOOM_HD T operator()(T a) const { using std::log; return log(a); } };
struct Tanh { template <typename T> LOOM_HD T operator()(T a) const { using std::tanh; return tanh(a); } };
struct Relu { template <typename T> LOOM_HD T operator()(T a) const { return a > T(0) ? a : T(0); } };
// 1 where x > 0, else 0: the derivative of relu (taken as 0 at the kink).
struct Step { template <typename T> LOOM_HD T operator()(T a) const { return a > T(0) ? T(1) : T(0); } };
// 1 - y^2 from y = tanh(x): the derivative of tanh in terms of its output.
struct TanhGrad { template <typename T> LOOM_HD T operator()(T y) const { return T(1) - y * y; } };

struct PowScalar {
  double exponent;
  template <typename T> LOOM_HD T operator()(T a) const {
    using std::pow;
    if (exponent == 2.0) return a * a;  // exact and fast for the common square
    return static_cast<T>(pow(a, static_cast<T>(exponent)));
  }
};

// Conversion between dtypes.
template <typename To> struct Cast {
  template <typename From> LOOM_HD To operator()(From a) const { return static_cast<To>(a); }
};

}  // namespace loom::fn
