// clone(x): a contiguous copy.                  dx = g
// to_dtype(x, t): a converted copy.             dx = to_dtype(g, x.dtype)
// to_device(x, d): a copy on another device.    dx = to_device(g, x.device)
// copy_/fill_: in-place writes outside autograd (initialization, optimizer steps).
// CPU kernel: ops/cpu/copy.cpp.
#include "elementwise.h"
#include "loom/backend.h"

namespace loom {

namespace {
// dst = cast(src), src broadcast to dst's shape; any dtypes, one device.
void convert_into(const Tensor& dst, const Tensor& src, std::string_view op) {
  LOOM_CHECK(kernels::broadcast_shapes(dst.shape(), src.shape(), op) == dst.shape(),
             "{}: source of shape {} cannot be broadcast to destination shape {}", op, src.shape(), dst.shape());
  Tensor source = Tensor::make_view(src, dst.shape(), kernels::broadcast_strides(src, dst.shape()), src.offset());
  detail::kernel_for<kernels::CopyKernel>("copy", src)(dst, source);
}

void check_writable(std::string_view op, const Tensor& dst) {
  LOOM_CHECK(!(grad_enabled() && dst.requires_grad()),
             "{}: in-place write to a tensor that requires grad (shape {}); wrap it in a NoGradGuard", op, dst.shape());
}
}  // namespace

void copy_(const Tensor& dst, const Tensor& src) {
  check_writable("copy_", dst);
  LOOM_CHECK(dst.device() == src.device(), "copy_: destination is on {} and source on {}; use to_device", dst.device(),
             src.device());
  WholeKernels whole;  // never a tensor half written
  convert_into(dst, src, "copy_");
  dst.storage()->bump_version();
}

void fill_(const Tensor& dst, double value) {
  check_writable("fill_", dst);
  WholeKernels whole;
  if (dst.is_contiguous()) {
    device_fill(dst, value);  // the device's Backend::fill
  } else {
    Tensor scalar = Tensor::empty({}, {DType::f64, dst.device()});
    device_fill(scalar, value);
    convert_into(dst, scalar, "fill_");
  }
  dst.storage()->bump_version();
}

Tensor clone(const Tensor& x, Where where) {
  CallSite site(where);
  Tensor out = Tensor::empty(x.shape(), {x.dtype(), x.device()});
  convert_into(out, x, "clone");
  return record("clone", {x}, out, [](BackwardContext&, const Tensor& g) -> detail::Grads { return {g}; });
}

Tensor contiguous(const Tensor& x, Where where) {
  if (x.is_contiguous()) return x;
  CallSite site(where);
  return clone(x);
}

Tensor to_dtype(const Tensor& x, DType dtype, Where where) {
  if (x.dtype() == dtype) return x;
  CallSite site(where);
  Tensor out = Tensor::empty(x.shape(), {dtype, x.device()});
  convert_into(out, x, "to_dtype");
  if (!is_floating(dtype)) return out;  // integer results carry no gradient
  DType from = x.dtype();
  return record("to_dtype", {x}, out,
                [from](BackwardContext&, const Tensor& g) -> detail::Grads { return {to_dtype(g, from)}; });
}

Tensor to_device(const Tensor& x, Device device, Where where) {
  if (x.device() == device) return x;
  CallSite site(where);
  Tensor out = transfer(contiguous(x), device);
  Device from = x.device();
  return record("to_device", {x}, out,
                [from](BackwardContext&, const Tensor& g) -> detail::Grads { return {to_device(g, from)}; });
}

LOOM_OP(clone){
    .name = "clone",
    .formula = "y = x, a contiguous copy",
    .derivative = "dx = g",
    .shape_rule = "y has x's shape",
    .call = [](const OpArgs& x) { return clone(x[0]); },
    .samples = {unary_sample({4, 7})},
    .schema = "clone(Tensor input) -> Tensor",
};

// float32 rounding (1e-7 relative) swamps central differences with eps 1e-6,
// so the matrix checks to_dtype's forward only; test_autograd checks its
// gradient (dx = to_dtype(g, float64)) exactly.
LOOM_OP(to_dtype){
    .name = "to_dtype",
    .formula = "y = x converted to dtype t",
    .derivative = "dx = to_dtype(g, x.dtype)",
    .shape_rule = "x's shape, dtype t",
    .call = [](const OpArgs& x) { return to_dtype(to_dtype(x[0], DType::f32), DType::f64); },
    .samples = {unary_sample({3, 5}, Domain::any, "f64->f32->f64")},
    .differentiable = false,
    .note = "float32 round trip: gradient checked exactly in test_autograd, not by finite differences",
};

}  // namespace loom
