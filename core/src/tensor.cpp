#include "loom/tensor.h"

#include <algorithm>
#include <cstring>

#include "loom/autograd.h"
#include "loom/backend.h"
#include "loom/kernel_table.h"

namespace loom {

Shape contiguous_strides(const Shape& shape) {
  Shape strides(shape.size());
  int64_t stride = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = stride;
    stride *= std::max<int64_t>(shape[i], 1);
  }
  return strides;
}

int64_t shape_numel(const Shape& shape) {
  // The product of the non-zero sizes is what strides reach, so it must fit even
  // when a zero size makes the tensor empty; a wrapped product once gave a
  // 16-byte buffer to a shape of 2^64 + 4 elements.
  int64_t n = 1;
  bool empty = false;
  for (int64_t s : shape) {
    LOOM_CHECK(s >= 0, "shape {} has a negative size", shape);
    empty = empty || s == 0;
    LOOM_CHECK(!__builtin_mul_overflow(n, std::max<int64_t>(s, 1), &n),
               "shape {} has more elements than a 64-bit count holds", shape);
  }
  return empty ? 0 : n;
}

int64_t wrap_dim(int64_t dim, int64_t ndim, std::string_view op) {
  LOOM_CHECK(ndim > 0, "{}: dim {} is out of range for a 0-d tensor (it has no dims)", op, dim);
  int64_t wrapped = dim < 0 ? dim + ndim : dim;
  LOOM_CHECK(wrapped >= 0 && wrapped < ndim, "{}: dim {} is out of range for a tensor with {} dims", op, dim, ndim);
  return wrapped;
}

std::optional<int64_t> wrap_dim_or_scalar(int64_t dim, int64_t ndim, std::string_view op) {
  if (ndim > 0) return wrap_dim(dim, ndim, op);
  LOOM_CHECK(dim == 0 || dim == -1, "{}: dim {} is out of range for a 0-d tensor (0 and -1 name its element)", op, dim);
  return std::nullopt;
}

int64_t strided_offset(int64_t linear, const Shape& sizes, const Shape& strides) {
  int64_t offset = 0;
  for (size_t d = sizes.size(); d-- > 0;) {
    offset += (linear % sizes[d]) * strides[d];
    linear /= sizes[d];
  }
  return offset;
}

Tensor Tensor::empty(const Shape& shape, TensorOptions options) {
  for (int64_t s : shape) LOOM_CHECK(s >= 0, "empty: negative size in shape {}", shape);
  int64_t bytes = 0;
  LOOM_CHECK(!__builtin_mul_overflow(shape_numel(shape), static_cast<int64_t>(dtype_size(options.dtype)), &bytes),
             "empty: shape {} of {} needs more bytes than a 64-bit count holds", shape, dtype_name(options.dtype));
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::make_shared<Storage>(static_cast<size_t>(bytes), options.device);
  impl->sizes = shape;
  impl->strides = contiguous_strides(shape);
  impl->dtype = options.dtype;
  return Tensor(std::move(impl));
}

Tensor Tensor::make_view(const Tensor& base, Shape sizes, Shape strides, int64_t offset) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = base.storage();
  impl->sizes = std::move(sizes);
  impl->strides = std::move(strides);
  impl->offset = offset;
  impl->dtype = base.dtype();
  return Tensor(std::move(impl));
}

int64_t Tensor::size(int64_t d) const { return shape()[wrap_dim(d, dim(), "size")]; }
int64_t Tensor::stride(int64_t d) const { return strides()[wrap_dim(d, dim(), "stride")]; }
int64_t Tensor::numel() const { return shape_numel(shape()); }

bool Tensor::is_contiguous() const {
  int64_t expected = 1;
  for (size_t i = shape().size(); i-- > 0;) {
    if (shape()[i] == 1) continue;
    if (strides()[i] != expected) return false;
    expected *= shape()[i];
  }
  return true;
}

void* Tensor::raw_data() const {
  return static_cast<char*>(storage()->data()) + offset() * static_cast<int64_t>(dtype_size(dtype()));
}

template <typename T>
std::vector<T> Tensor::to_vector() const {
  LOOM_CHECK(device().is_cpu(), "to_vector: tensor is on {}; copy it to the cpu first", device());
  std::vector<T> out(static_cast<size_t>(numel()));
  dispatch_storage(dtype(), "to_vector", [&](auto tag) {
    using S = typename decltype(tag)::type;
    const S* base = static_cast<const S*>(raw_data());
    const int64_t n = numel();
    if (is_contiguous()) {  // decoders read every step's [rows, vocab] log-probabilities this way
      std::transform(base, base + n, out.begin(), [](S x) { return static_cast<T>(x); });
      return;
    }
    for (int64_t i = 0; i < n; ++i) out[i] = static_cast<T>(base[strided_offset(i, shape(), strides())]);
  });
  return out;
}

template <typename T>
T Tensor::item() const {
  LOOM_CHECK(numel() == 1, "item: tensor of shape {} has {} elements, expected 1", shape(), numel());
  return to_vector<T>()[0];
}

#define LOOM_INSTANTIATE(T)                             \
  template std::vector<T> Tensor::to_vector<T>() const; \
  template T Tensor::item<T>() const;
LOOM_INSTANTIATE(float)
LOOM_INSTANTIATE(double)
LOOM_INSTANTIATE(int32_t)
LOOM_INSTANTIATE(int64_t)
LOOM_INSTANTIATE(bool)
#undef LOOM_INSTANTIATE

bool Tensor::requires_grad() const { return impl().requires_grad || impl().grad_fn != nullptr; }

Tensor& Tensor::requires_grad_(bool enabled) {
  LOOM_CHECK(is_leaf(), "requires_grad_: only leaf tensors can be marked; this one comes from {}", grad_fn()->name);
  LOOM_CHECK(!enabled || is_floating(dtype()), "requires_grad_: only floating tensors can require gradients, got {}",
             dtype_name(dtype()));
  impl().requires_grad = enabled;
  return *this;
}

void Tensor::undefined_tensor_error() {
  std::string where;
  if (CallSite::active()) {
    const std::source_location at = CallSite::current();
    where = fmt::format(" in the op called at {}:{} ({})", at.file_name(), at.line(), at.function_name());
  }
  fail(
      "tensor: use of an undefined tensor{}: a Tensor() never assigned, or the .grad() of a tensor that no "
      "backward has reached yet (call backward() first; an input the loss does not depend on has none)",
      where);
}

Tensor Tensor::grad() const {
  std::lock_guard lock(impl().grad_mutex.mutex);
  return impl().grad ? Tensor(impl().grad) : Tensor();
}

void Tensor::set_grad(const Tensor& g) const {
  if (g.defined())
    LOOM_CHECK(g.shape() == shape() && g.dtype() == dtype(), "set_grad: gradient {} {} does not match tensor {} {}",
               g.shape(), dtype_name(g.dtype()), shape(), dtype_name(dtype()));
  std::lock_guard lock(impl().grad_mutex.mutex);
  impl().grad = g.impl_ptr();
}

void Tensor::retain_grad() const {
  LOOM_CHECK(requires_grad(), "retain_grad: tensor does not require grad");
  if (is_leaf()) return;  // leaves keep .grad anyway
  grad_fn()->retained_output = impl_;
}

Tensor Tensor::detach() const {
  Tensor out = make_view(*this, shape(), strides(), offset());
  return out;
}

size_t Tensor::register_hook(TensorHook hook) const {
  LOOM_CHECK(requires_grad(), "register_hook: tensor does not require grad, so no gradient will flow");
  auto& hooks = is_leaf() ? impl().hooks : grad_fn()->hooks;
  hooks.push_back(std::move(hook));
  return hooks.size() - 1;
}

void Tensor::backward(const Tensor& gradient, bool retain_graph, bool create_graph) const {
  LOOM_CHECK(requires_grad(), "backward: tensor does not require grad and has no grad_fn");
  if (!gradient.defined())
    LOOM_CHECK(numel() == 1,
               "backward: gradient can be implicitly created only for scalar outputs; this tensor has "
               "shape {}, pass a seed gradient of that shape",
               shape());
  Tensor seed = gradient;
  if (!seed.defined()) {
    seed = Tensor::empty(shape(), {dtype(), device()});
    device_fill(seed, 1.0);
  }
  // Accumulate into leaves: grad() with no inputs means "every leaf".
  loom::grad({*this}, {}, {seed}, retain_graph, create_graph);
}

void device_fill(const Tensor& t, double value) {
  LOOM_CHECK(t.is_contiguous(), "device_fill: tensor of shape {} with strides {} must be contiguous", t.shape(),
             t.strides());
  dispatch_storage(t.dtype(), "device_fill", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T v = static_cast<T>(value);
    KernelScope device_call;
    backend(t.device().type).fill(t.raw_data(), t.device(), &v, sizeof(T), static_cast<size_t>(t.numel()));
  });
}

Tensor transfer(const Tensor& t, Device device) {
  LOOM_CHECK(t.is_contiguous(), "transfer: tensor of shape {} with strides {} must be contiguous", t.shape(),
             t.strides());
  Tensor out = Tensor::empty(t.shape(), {t.dtype(), device});
  Backend& b = backend(device.is_cpu() ? t.device().type : device.type);
  KernelScope device_call;
  b.copy(out.raw_data(), device, t.raw_data(), t.device(), static_cast<size_t>(t.numel()) * dtype_size(t.dtype()));
  return out;
}

namespace {
template <typename T>
Tensor tensor_from(const std::vector<T>& values, const Shape& shape, DType dtype) {
  Tensor out = Tensor::empty(shape, {dtype});
  dispatch_storage(dtype, "tensor", [&](auto tag) {
    using S = typename decltype(tag)::type;
    S* p = static_cast<S*>(out.raw_data());
    for (size_t i = 0; i < values.size(); ++i) p[i] = static_cast<S>(values[i]);
  });
  return out;
}
}  // namespace

Tensor tensor(std::initializer_list<double> values, DType dtype) {
  return tensor_from(std::vector<double>(values), {static_cast<int64_t>(values.size())}, dtype);
}

Tensor tensor(std::initializer_list<std::initializer_list<double>> rows, DType dtype) {
  std::vector<double> flat;
  size_t cols = rows.size() ? rows.begin()->size() : 0;
  for (const auto& row : rows) {
    LOOM_CHECK(row.size() == cols, "tensor: ragged rows ({} and {} values)", cols, row.size());
    flat.insert(flat.end(), row.begin(), row.end());
  }
  return tensor_from(flat, {static_cast<int64_t>(rows.size()), static_cast<int64_t>(cols)}, dtype);
}

template <typename T>
Tensor from_vector(const std::vector<T>& values, const Shape& shape, TensorOptions options) {
  LOOM_CHECK(static_cast<int64_t>(values.size()) == shape_numel(shape),
             "from_vector: {} values do not fill shape {} ({} elements)", values.size(), shape, shape_numel(shape));
  Tensor host = tensor_from(values, shape, options.dtype);
  if (options.device.is_cpu()) return host;
  Tensor out = Tensor::empty(shape, options);
  KernelScope device_call;
  backend(options.device.type).copy(out.raw_data(), options.device, host.raw_data(), kCPU, host.storage()->nbytes());
  return out;
}
template Tensor from_vector(const std::vector<float>&, const Shape&, TensorOptions);
template Tensor from_vector(const std::vector<double>&, const Shape&, TensorOptions);
template Tensor from_vector(const std::vector<int32_t>&, const Shape&, TensorOptions);
template Tensor from_vector(const std::vector<int64_t>&, const Shape&, TensorOptions);

}  // namespace loom
