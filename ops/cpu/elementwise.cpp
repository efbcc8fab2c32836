// CPU kernels of the elementwise ops: the math of each op is its functor in
// kernels/functors.h (host and device code alike), run by the loop engine
// (kernels/loops.h: broadcasting, coalescing, OpenMP) as the fast kernel and by
// one plain loop over logical indices as the reference kernel.
#include "gelu_span.h"
#include "loom/kernel_table.h"
#include "loom/kernels/functors.h"
#include "loom/kernels/loops.h"
#include "loom/ops/kernel_signatures.h"
#include "type_lists.h"

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

template <typename T, typename F>
void unary_fast(const Tensor& out, const Tensor& x, const Scalars& s) {
  kernels::unary_loop<T, T>(out, x, with_scalars<F>(s));
}
template <typename T, typename F>
void unary_reference(const Tensor& out, const Tensor& x, const Scalars& s) {
  kernels::reference_unary<T, T>(out, x, with_scalars<F>(s));
}
// The float32 gelu over a contiguous input: the AVX-512/AVX2 span (gelu_span.h).
void gelu_float_fast(const Tensor& out, const Tensor& x, const Scalars& s) {
  if (!x.is_contiguous()) return unary_fast<float, fn::Gelu>(out, x, s);
  kernels::gelu_contiguous(out.data<float>(), x.data<float>(), x.numel());
}

template <typename T, typename Out, typename F>
void binary_fast(const Tensor& out, const Tensor& a, const Tensor& b) {
  kernels::binary_loop<T, Out>(out, a, b, F{});
}
template <typename T, typename Out, typename F>
void binary_reference(const Tensor& out, const Tensor& a, const Tensor& b) {
  kernels::reference_binary<T, Out>(out, a, b, F{});
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

using loom::TypeList;
using Floating = FloatingTypes;
using Numeric = NumericTypes;
using All = AllTypes;

// op's kernels for each dtype of the list: Fast (and Reference, default the same math).
template <typename F, typename Reference = F, typename... Ts>
void unary(std::string_view op, TypeList<Ts...>) {
  (register_kernel<kernels::UnaryKernel>(op, DeviceType::cpu, dtype_of<Ts>(), unary_fast<Ts, F>,
                                         unary_reference<Ts, Reference>),
   ...);
}
template <typename F, typename Reference = F, typename... Ts>
void binary(std::string_view op, TypeList<Ts...>) {
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

LOOM_KERNELS(cpu_elementwise) {
  unary<fn::Neg>("neg", Numeric{});
  unary<fn::Abs>("abs", Numeric{});
  unary<fn::Sign>("sign", Numeric{});
  unary<fn::Relu>("relu", Numeric{});
  unary<fn::Step>("step", Numeric{});
  unary<fn::Clamp>("clamp", Numeric{});
  unary<fn::ClampMask>("clamp_mask", Floating{});
  unary<fn::Exp>("exp", Floating{});
  unary<fn::Log>("log", Floating{});
  unary<fn::Tanh>("tanh", Floating{});
  unary<fn::Sqrt>("sqrt", Floating{});
  unary<fn::Rsqrt>("rsqrt", Floating{});
  unary<fn::Sigmoid>("sigmoid", Floating{});
  unary<fn::Softplus>("softplus", Floating{});
  unary<fn::PowScalar>("pow", Floating{});
  register_kernel<kernels::UnaryKernel>("gelu", DeviceType::cpu, DType::f32, gelu_float_fast,
                                        unary_reference<float, fn::GeluReference>);
  unary<fn::Gelu, fn::GeluReference>("gelu", TypeList<double>{});
  unary<fn::GeluTanh>("gelu_tanh", Floating{});

  binary<fn::Add>("add", Numeric{});
  binary<fn::Sub>("sub", Numeric{});
  binary<fn::Mul>("mul", Numeric{});
  binary<fn::Div>("div", Numeric{});
  binary<fn::Maximum>("maximum", Numeric{});
  binary<fn::Minimum>("minimum", Numeric{});
  binary<fn::MaximumShare>("maximum_share", Floating{});
  binary<fn::MinimumShare>("minimum_share", Floating{});
  binary<fn::ReluBackward>("relu_backward", Floating{});
  binary<fn::TanhBackward>("tanh_backward", Numeric{});
  binary<fn::SigmoidBackward>("sigmoid_backward", Floating{});
  binary<fn::GeluBackward, fn::GeluBackwardReference>("gelu_backward", Floating{});
  binary<fn::GeluTanhBackward>("gelu_tanh_backward", Floating{});

  compare<fn::Eq>("eq", All{});
  compare<fn::Ne>("ne", All{});
  compare<fn::Lt>("lt", All{});
  compare<fn::Le>("le", All{});
  compare<fn::Gt>("gt", All{});
  compare<fn::Ge>("ge", All{});

  where(All{});
}

}  // namespace loom
