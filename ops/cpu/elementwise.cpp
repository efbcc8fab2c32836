// CPU kernels of the elementwise ops listed in kernels/elementwise_ops.h: the math of
// each op is its functor in kernels/functors.h (host and device code alike), run by
// the loop engine (kernels/loops.h: broadcasting, coalescing, OpenMP) as the fast
// kernel and by one plain loop over logical indices as the reference kernel.
#include "gelu_span.h"
#include "loom/kernel_table.h"
#include "loom/kernels/elementwise_ops.h"
#include "loom/kernels/functors.h"
#include "loom/kernels/loops.h"
#include "loom/ops/kernel_signatures.h"

namespace loom {

namespace {
using kernels::Scalars;

// A functor with its scalar attributes (pow's exponent, clamp's bounds) filled in.
template <typename F>
F with_scalars(const Scalars& s) {
  if constexpr (std::is_constructible_v<F, double, double>)
    return F{s.a, s.b};
  else if constexpr (std::is_constructible_v<F, double>)
    return F{s.a};
  else
    return F{};
}

// The math of an op's reference kernel: its functor's, unless the fast form rounds differently.
template <typename F>
struct reference_math {
  using type = F;
};
template <>
struct reference_math<fn::Gelu> {
  using type = fn::GeluReference;
};
template <>
struct reference_math<fn::GeluBackward> {
  using type = fn::GeluBackwardReference;
};

template <typename T, typename F>
void unary_fast(const Tensor& out, const Tensor& x, const Scalars& s) {
  // The float32 gelu over a contiguous input: the AVX-512/AVX2 span (gelu_span.h).
  if constexpr (std::is_same_v<F, fn::Gelu> && std::is_same_v<T, float>)
    if (x.is_contiguous()) return kernels::gelu_contiguous(out.data<float>(), x.data<float>(), x.numel());
  kernels::unary_loop<T, T>(out, x, fn::math_for<T>(with_scalars<F>(s)));
}
template <typename T, typename F>
void unary_reference(const Tensor& out, const Tensor& x, const Scalars& s) {
  kernels::reference_unary<T, T>(out, x, fn::math_for<T>(with_scalars<F>(s)));
}

template <typename T, typename Out, typename F>
void binary_fast(const Tensor& out, const Tensor& a, const Tensor& b) {
  kernels::binary_loop<T, Out>(out, a, b, fn::math_for<T>(F{}));
}
template <typename T, typename Out, typename F>
void binary_reference(const Tensor& out, const Tensor& a, const Tensor& b) {
  kernels::reference_binary<T, Out>(out, a, b, fn::math_for<T>(F{}));
}

// bool storage holds 0/1 bytes; read as uint8_t the fast loop vectorizes.
template <typename T>
void where_fast(const Tensor& out, const Tensor& c, const Tensor& a, const Tensor& b) {
  kernels::ternary_loop<uint8_t, T, T>(out, c, a, b, fn::Select{});
}
template <typename T>
void where_reference(const Tensor& out, const Tensor& c, const Tensor& a, const Tensor& b) {
  kernels::reference_ternary<bool, T, T>(out, c, a, b, fn::Select{});
}

// op's kernels for each dtype of the list: the fast one and the reference one.
template <typename F, typename... Ts>
void unary(std::string_view op, TypeList<Ts...>) {
  using Reference = typename reference_math<F>::type;
  (register_kernel<kernels::UnaryKernel>(op, DeviceType::cpu, dtype_of<Ts>(), unary_fast<Ts, F>,
                                         unary_reference<Ts, Reference>),
   ...);
}
template <typename F, typename... Ts>
void binary(std::string_view op, TypeList<Ts...>) {
  using Reference = typename reference_math<F>::type;
  (register_kernel<kernels::BinaryKernel>(op, DeviceType::cpu, dtype_of<Ts>(), binary_fast<Ts, Ts, F>,
                                          binary_reference<Ts, Ts, Reference>),
   ...);
}
template <typename F, typename... Ts>
void compare(std::string_view op, TypeList<Ts...>) {
  (register_kernel<kernels::BinaryKernel>(op, DeviceType::cpu, dtype_of<Ts>(), binary_fast<Ts, bool, F>,
                                          binary_reference<Ts, bool, F>),
   ...);
}
template <typename... Ts>
void where(TypeList<Ts...>) {
  (register_kernel<kernels::TernaryKernel>("where", DeviceType::cpu, dtype_of<Ts>(), where_fast<Ts>,
                                           where_reference<Ts>),
   ...);
}
}  // namespace

// Every op of loom/kernels/elementwise_ops.h, and where.
LOOM_KERNELS(cpu_elementwise) {
#define LOOM_REGISTER(name, functor, types) unary<fn::functor>(#name, types{});
  LOOM_UNARY_OPS(LOOM_REGISTER)
#undef LOOM_REGISTER
#define LOOM_REGISTER(name, functor, types) binary<fn::functor>(#name, types{});
  LOOM_BINARY_OPS(LOOM_REGISTER)
#undef LOOM_REGISTER
#define LOOM_REGISTER(name, functor, types) compare<fn::functor>(#name, types{});
  LOOM_COMPARE_OPS(LOOM_REGISTER)
#undef LOOM_REGISTER
  where(StorageTypes{});
}

}  // namespace loom
