#pragma once
// The math of elementwise ops, written once as small functors callable from host
// and device code: the CPU kernels run exactly the arithmetic CUDA will run.
#include <cmath>
#include <limits>
#include <type_traits>

#include "loom/bfloat16.h"
#include "loom/hostdevice.h"
#include "loom/kernels/vec_math.h"

namespace loom::fn {

struct Add {
  template <typename T>
  LOOM_HD T operator()(T a, T b) const {
    return a + b;
  }
};
struct Sub {
  template <typename T>
  LOOM_HD T operator()(T a, T b) const {
    return a - b;
  }
};
struct Mul {
  template <typename T>
  LOOM_HD T operator()(T a, T b) const {
    return a * b;
  }
};
struct Pow {
  template <typename T>
  LOOM_HD T operator()(T a, T b) const {
    using std::pow;
    return static_cast<T>(pow(a, b));
  }
};
struct Div {
  template <typename T>
  LOOM_HD T operator()(T a, T b) const {
    return a / b;
  }
};
struct Neg {
  template <typename T>
  LOOM_HD T operator()(T a) const {
    return -a;
  }
};
// float32 takes the vectorizable exp (kernels/vec_math.h); float64 takes libm's.
struct Exp {
  template <typename T>
  LOOM_HD T operator()(T a) const {
#if !defined(__CUDA_ARCH__)
    if constexpr (std::is_same_v<T, float>) return kernels::exp_float(a);
#endif
    using std::exp;
    return exp(a);
  }
};
struct Log {
  template <typename T>
  LOOM_HD T operator()(T a) const {
    using std::log;
    return log(a);
  }
};
struct Tanh {
  template <typename T>
  LOOM_HD T operator()(T a) const {
    using std::tanh;
    return tanh(a);
  }
};
// NaN stays NaN, as in PyTorch: a diverged activation must not pass for 0. -0 gives +0.
struct Relu {
  template <typename T>
  LOOM_HD T operator()(T a) const {
    return a > T(0) || a != a ? a : T(0);
  }
};
// 1 where x > 0, else 0: the derivative of relu (taken as 0 at the kink).
struct Step {
  template <typename T>
  LOOM_HD T operator()(T a) const {
    return a > T(0) ? T(1) : T(0);
  }
};
// g where x > 0, else 0: relu's backward as one select (no 0 * inf = NaN where x <= 0).
struct ReluBackward {
  template <typename T>
  LOOM_HD T operator()(T x, T g) const {
    return x > T(0) ? g : T(0);
  }
};
// g * (1 - y^2) from y = tanh(x): tanh's backward in terms of its output.
struct TanhBackward {
  template <typename T>
  LOOM_HD T operator()(T y, T g) const {
    return g * (T(1) - y * y);
  }
};

struct PowScalar {
  double exponent;
  template <typename T>
  LOOM_HD T operator()(T a) const {
    using std::pow;
    if (exponent == 2.0) return a * a;  // exact and fast for the common square
    return static_cast<T>(pow(a, static_cast<T>(exponent)));
  }
};

// ---- sqrt, rsqrt, abs, sigmoid, gelu, clamp ----
struct Sqrt {
  template <typename T>
  LOOM_HD T operator()(T a) const {
    using std::sqrt;
    return sqrt(a);
  }
};
struct Rsqrt {
  template <typename T>
  LOOM_HD T operator()(T a) const {
    using std::sqrt;
    return T(1) / sqrt(a);
  }
};
struct Abs {
  template <typename T>
  LOOM_HD T operator()(T a) const {
    using std::abs;
    return abs(a);
  }
};
// -1, 0 or 1: the derivative of abs (taken as 0 at the kink, like PyTorch).
struct Sign {
  template <typename T>
  LOOM_HD T operator()(T a) const {
    return a > T(0) ? T(1) : (a < T(0) ? T(-1) : T(0));
  }
};
// 1 / (1 + e^-x); for very negative x, e^-x overflows to inf and the result is
// exactly 0, so no special case is needed.
struct Sigmoid {
  template <typename T>
  LOOM_HD T operator()(T a) const {
    return T(1) / (T(1) + Exp{}(-a));
  }
};
// g * y * (1 - y) from y = sigmoid(x): the derivative of sigmoid in terms of its output.
struct SigmoidBackward {
  template <typename T>
  LOOM_HD T operator()(T y, T g) const {
    return g * y * (T(1) - y);
  }
};

// log(1 + e^x) = max(x, 0) + log(1 + e^-|x|): e^-|x| <= 1 never overflows, so
// large x gives x and very negative x gives log1p(e^x) ~ e^x, with no cancellation.
struct Softplus {
  template <typename T>
  LOOM_HD T operator()(T a) const {
    using std::log1p;
    T positive = a > T(0) ? a : T(0);
    T negative_abs = a > T(0) ? -a : a;
    return positive + static_cast<T>(log1p(Exp{}(negative_abs)));
  }
};

// gelu(x) = x * Phi(x), Phi the standard normal CDF = (1 + erf(x / sqrt 2)) / 2
// (the exact form, PyTorch's default approximate='none').
inline constexpr double kSqrtHalf = 0.70710678118654752440;    // 1 / sqrt(2)
inline constexpr double kInvSqrt2Pi = 0.39894228040143267794;  // 1 / sqrt(2 pi)
// The reference kernels (and float64): libm's erf, the textbook formula.
struct GeluReference {
  template <typename T>
  LOOM_HD T operator()(T x) const {
    using std::erf;
    return T(0.5) * x * (T(1) + erf(x * T(kSqrtHalf)));
  }
};
// g * gelu'(x) = g * (Phi(x) + x * phi(x)), phi the standard normal density.
struct GeluBackwardReference {
  template <typename T>
  LOOM_HD T operator()(T x, T g) const {
    using std::erf;
    using std::exp;
    T cdf = T(0.5) * (T(1) + erf(x * T(kSqrtHalf)));
    T pdf = T(kInvSqrt2Pi) * exp(T(-0.5) * x * x);
    return g * (cdf + x * pdf);
  }
};
// The fast kernels: float32 takes the vectorizable Phi of kernels/vec_math.h
// (libm's erff is a call, ~10x slower than the vector loop; the vector Phi is
// also accurate in relative terms for negative x, where 1 + erf cancels);
// float64 keeps libm.
struct Gelu {
  template <typename T>
  LOOM_HD T operator()(T x) const {
#if !defined(__CUDA_ARCH__)
    if constexpr (std::is_same_v<T, float>) return kernels::gelu_float(x);
#endif
    return GeluReference{}(x);
  }
};
struct GeluBackward {
  template <typename T>
  LOOM_HD T operator()(T x, T g) const {
#if !defined(__CUDA_ARCH__)
    if constexpr (std::is_same_v<T, float>) {
      float pdf;
      float cdf = kernels::normal_cdf_pdf_float(x, &pdf);
      return g * (cdf + x * pdf);
    }
#endif
    return GeluBackwardReference{}(x, g);
  }
};

// gelu with PyTorch's approximate='tanh' (BERT's and GPT-2's form):
//   y = x/2 * (1 + tanh(u)),  u = sqrt(2/pi) * (x + 0.044715 x^3)
// One formula for every kernel: tanh vectorizes well enough, and the CUDA kernel
// runs the same code. Like PyTorch, -inf gives NaN (-inf * 0).
inline constexpr double kSqrt2OverPi = 0.79788456080286535588;  // sqrt(2 / pi)
inline constexpr double kGeluTanhCubic = 0.044715;
struct GeluTanh {
  template <typename T>
  LOOM_HD T operator()(T x) const {
    using std::tanh;
    T u = T(kSqrt2OverPi) * (x + T(kGeluTanhCubic) * x * x * x);
    return T(0.5) * x * (T(1) + tanh(u));
  }
};
// g * y'(x) = g * ((1 + t)/2 + x/2 * (1 - t^2) * u'),  t = tanh(u), u' = sqrt(2/pi) * (1 + 3 * 0.044715 x^2)
struct GeluTanhBackward {
  template <typename T>
  LOOM_HD T operator()(T x, T g) const {
    using std::tanh;
    T x2 = x * x;
    T t = tanh(T(kSqrt2OverPi) * (x + T(kGeluTanhCubic) * x2 * x));
    T du = T(kSqrt2OverPi) * (T(1) + T(3 * kGeluTanhCubic) * x2);
    return g * (T(0.5) * (T(1) + t) + T(0.5) * x * (T(1) - t * t) * du);
  }
};

// min(max(x, lo), hi); NaN passes through (both comparisons are false).
struct Clamp {
  double lo, hi;
  template <typename T>
  LOOM_HD T operator()(T a) const {
    T l = static_cast<T>(lo), h = static_cast<T>(hi);
    T t = a < l ? l : a;
    return t > h ? h : t;
  }
};
// 1 where lo <= x <= hi (the gradient passes), else 0: PyTorch's convention at the bounds.
struct ClampMask {
  double lo, hi;
  template <typename T>
  LOOM_HD T operator()(T a) const {
    // `&`, not `&&`: no short-circuit branch, so the loop vectorizes.
    return ((a >= static_cast<T>(lo)) & (a <= static_cast<T>(hi))) ? T(1) : T(0);
  }
};

// ---- maximum, minimum: NaN propagates, like PyTorch ----
template <typename T>
LOOM_HD bool is_nan(T a) {
  if constexpr (std::is_floating_point_v<T>)
    return a != a;
  else
    return false;
}
struct Maximum {
  template <typename T>
  LOOM_HD T operator()(T a, T b) const {
    return (a > b || is_nan(a)) ? a : b;
  }
};
struct Minimum {
  template <typename T>
  LOOM_HD T operator()(T a, T b) const {
    return (a < b || is_nan(a)) ? a : b;
  }
};
// a's share of the gradient of maximum(a, b): 1 where a wins, 1/2 on a tie
// (split evenly, like PyTorch), 0 where b wins. b's share is MaximumShare(b, a).
struct MaximumShare {
  template <typename T>
  LOOM_HD T operator()(T a, T b) const {
    return a > b ? T(1) : (a == b ? T(0.5) : T(0));
  }
};
struct MinimumShare {
  template <typename T>
  LOOM_HD T operator()(T a, T b) const {
    return a < b ? T(1) : (a == b ? T(0.5) : T(0));
  }
};

// ---- comparisons: bool results ----
struct Eq {
  template <typename T>
  LOOM_HD bool operator()(T a, T b) const {
    return a == b;
  }
};
struct Ne {
  template <typename T>
  LOOM_HD bool operator()(T a, T b) const {
    return a != b;
  }
};
struct Lt {
  template <typename T>
  LOOM_HD bool operator()(T a, T b) const {
    return a < b;
  }
};
struct Le {
  template <typename T>
  LOOM_HD bool operator()(T a, T b) const {
    return a <= b;
  }
};
struct Gt {
  template <typename T>
  LOOM_HD bool operator()(T a, T b) const {
    return a > b;
  }
};
struct Ge {
  template <typename T>
  LOOM_HD bool operator()(T a, T b) const {
    return a >= b;
  }
};

// cond ? a : b (where, masked_fill). The condition is any integral type: CPU
// kernels read bool storage as uint8_t, which the compiler vectorizes (bool it won't).
struct Select {
  template <typename C, typename T>
  LOOM_HD T operator()(C c, T a, T b) const {
    return c ? a : b;
  }
};

// Conversion between dtypes. A floating value into an integer type truncates toward
// zero, saturating where C++ leaves it undefined, on every device as CUDA's conversion
// does: NaN gives 0, values past the type's range its smallest or largest value.
template <typename To>
struct Cast {
  template <typename From>
  LOOM_HD To operator()(From a) const {
    constexpr bool kFloatToInteger = std::is_integral_v<To> && !std::is_same_v<To, bool> &&
                                     (std::is_floating_point_v<From> || std::is_same_v<From, bfloat16>);
    if constexpr (kFloatToInteger) {
      const double v = static_cast<double>(a);
      constexpr double lowest = static_cast<double>(std::numeric_limits<To>::lowest());
      constexpr double past_max = -2.0 * static_cast<double>(std::numeric_limits<To>::lowest() / 2);  // 2^bits-1
      if (!(v == v)) return To(0);
      if (v <= lowest) return std::numeric_limits<To>::lowest();
      if (v >= past_max) return std::numeric_limits<To>::max();
      return static_cast<To>(v);
    } else {
      return static_cast<To>(a);
    }
  }
};

// bfloat16 holds values, it does not compute: F's float32 math on the widened
// operands; storing the float32 result into a bfloat16 rounds it once (autocast's
// rule). A comparison's bool result passes through.
template <typename F>
struct InFloat32 {
  F f;
  template <typename... A>
  LOOM_HD auto operator()(A... a) const {
    return f(static_cast<float>(a)...);
  }
};

// The functor that runs F's math on elements of type T: F itself, or InFloat32<F> on bfloat16.
template <typename T, typename F>
LOOM_HD auto math_for(F f) {
  if constexpr (std::is_same_v<T, bfloat16>)
    return InFloat32<F>{f};
  else
    return f;
}

}  // namespace loom::fn
