// Tensor factories: no inputs, no gradient. full/zeros/ones fill through the
// device (fill_); arange runs its kernel (ops/cpu/factory.cpp).
#include "elementwise.h"

namespace loom {

Tensor full(const Shape& shape, double value, TensorOptions options) {
  Tensor out = Tensor::empty(shape, options);
  NoGradGuard no_grad;
  fill_(out, value);
  return out;
}

Tensor zeros(const Shape& shape, TensorOptions options) { return full(shape, 0.0, options); }
Tensor ones(const Shape& shape, TensorOptions options) { return full(shape, 1.0, options); }
Tensor zeros_like(const Tensor& t) { return zeros(t.shape(), {t.dtype(), t.device()}); }
Tensor ones_like(const Tensor& t) { return ones(t.shape(), {t.dtype(), t.device()}); }
Tensor full_like(const Tensor& t, double value) { return full(t.shape(), value, {t.dtype(), t.device()}); }
Tensor scalar_tensor(double value, TensorOptions options) { return full({}, value, options); }

Tensor arange(int64_t end, TensorOptions options) {
  LOOM_CHECK(end >= 0, "arange: end must be non-negative, got {}", end);
  LOOM_CHECK(options.dtype != DType::b8, "arange: expected a numeric dtype, got {}", dtype_name(options.dtype));
  Tensor out = Tensor::empty({end}, options);
  detail::kernel_for<kernels::ArangeKernel>("arange", out)(out);
  return out;
}

}  // namespace loom
