// Tensor factories: no inputs, no gradient.
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
  detail::require_cpu("arange", Tensor::empty({0}, options));
  Tensor out = Tensor::empty({end}, options);
  dispatch_numeric(options.dtype, "arange", [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = out.data<T>();
    for (int64_t i = 0; i < end; ++i) p[i] = static_cast<T>(i);
  });
  return out;
}

}  // namespace loom
