// Tensor's method sugar (declared in core/tensor.h), forwarding to the ops.
#include "loom/ops.h"

namespace loom {

Tensor Tensor::reshape(const Shape& shape) const { return loom::reshape(*this, shape); }
Tensor Tensor::view(const Shape& shape) const { return loom::view(*this, shape); }
Tensor Tensor::permute(const Shape& dims) const { return loom::permute(*this, dims); }
Tensor Tensor::transpose(int64_t dim0, int64_t dim1) const { return loom::transpose(*this, dim0, dim1); }
Tensor Tensor::t() const {
  LOOM_CHECK(dim() == 2, "t: expected a 2-D tensor, got shape {}", shape());
  return loom::transpose(*this, 0, 1);
}
Tensor Tensor::narrow(int64_t d, int64_t start, int64_t length) const { return loom::narrow(*this, d, start, length); }
Tensor Tensor::slice(int64_t d, int64_t start, int64_t end, int64_t step) const {
  return loom::slice(*this, d, start, end, step);
}
Tensor Tensor::select(int64_t d, int64_t index) const { return loom::select(*this, d, index); }
Tensor Tensor::expand(const Shape& shape) const { return loom::expand(*this, shape); }
Tensor Tensor::squeeze(int64_t d) const { return loom::squeeze(*this, d); }
Tensor Tensor::unsqueeze(int64_t d) const { return loom::unsqueeze(*this, d); }
Tensor Tensor::contiguous() const { return loom::contiguous(*this); }
Tensor Tensor::clone() const { return loom::clone(*this); }
Tensor Tensor::to(DType dtype) const { return loom::to_dtype(*this, dtype); }
Tensor Tensor::to(Device device) const { return loom::to_device(*this, device); }
Tensor Tensor::sum(const Shape& dims, bool keepdim) const { return loom::sum(*this, dims, keepdim); }
Tensor Tensor::mean(const Shape& dims, bool keepdim) const { return loom::mean(*this, dims, keepdim); }
Tensor Tensor::amax(const Shape& dims, bool keepdim) const { return loom::amax(*this, dims, keepdim); }
Tensor Tensor::logsumexp(const Shape& dims, bool keepdim) const { return loom::logsumexp(*this, dims, keepdim); }
Tensor Tensor::var(const Shape& dims, bool keepdim, int64_t correction) const {
  return loom::var(*this, dims, keepdim, correction);
}
Tensor Tensor::softmax(int64_t d) const { return loom::softmax(*this, d); }
Tensor Tensor::log_softmax(int64_t d) const { return loom::log_softmax(*this, d); }
Tensor Tensor::pow(double exponent) const { return loom::pow(*this, exponent); }
Tensor Tensor::exp() const { return loom::exp(*this); }
Tensor Tensor::log() const { return loom::log(*this); }
Tensor Tensor::relu() const { return loom::relu(*this); }
Tensor Tensor::tanh() const { return loom::tanh(*this); }
Tensor Tensor::abs() const { return loom::abs(*this); }

}  // namespace loom
