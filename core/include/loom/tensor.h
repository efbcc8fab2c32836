#pragma once
// Tensor: a cheap handle (one shared_ptr) to shared storage plus shape, strides
// and offset. Copying a Tensor copies the handle; views share the storage.
#include <concepts>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <optional>
#include <source_location>
#include <string>
#include <vector>

#include "loom/device.h"
#include "loom/dtype.h"
#include "loom/error.h"
#include "loom/storage.h"

namespace loom {

using Shape = std::vector<int64_t>;

/// One dim given as an integer (sum(x, 1, true), x.amax(-1)), as PyTorch takes it. A
/// template, so that {} and {0, 2} still mean a Shape of dims (an int64_t parameter
/// would take `{}` as dim 0).
/// Where an op was called from: every op takes one, defaulted to the caller's line,
/// so anomaly mode and errors can name the user's source line.
using Where = std::source_location;

template <typename T>
concept DimIndex = std::integral<T> && !std::same_as<T, bool>;

class Node;
class Tensor;
using TensorHook = std::function<Tensor(const Tensor&)>;

/// A mutex that a copied TensorImpl does not share: the copy gets a fresh one.
struct GradMutex {
  std::mutex mutex;
  GradMutex() = default;
  GradMutex(const GradMutex&) {}
  GradMutex& operator=(const GradMutex&) { return *this; }
};

struct TensorImpl {
  std::shared_ptr<Storage> storage;
  Shape sizes;
  Shape strides;       // in elements
  int64_t offset = 0;  // in elements
  DType dtype = DType::f32;

  /// Autograd: a leaf has no grad_fn; requires_grad marks the leaves we train.
  bool requires_grad = false;
  std::shared_ptr<Node> grad_fn;
  std::shared_ptr<TensorImpl> grad;
  std::weak_ptr<Node> grad_accumulator;  // a leaf's AccumulateGrad node, made on first use
  std::vector<TensorHook> hooks;         // a leaf's hooks (a non-leaf keeps them on grad_fn)
  std::string name;                      // optional, shown in graph exports
  /// Guards grad and grad_accumulator: backward() may run on several threads into one leaf.
  mutable GradMutex grad_mutex;
};

struct TensorOptions {
  DType dtype = DType::f32;
  Device device = kCPU;
};

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  /// A new tensor with fresh, uninitialized contiguous storage.
  static Tensor empty(const Shape& shape, TensorOptions options = {});
  /// A view of existing storage (no autograd recording: ops/ wraps this).
  static Tensor make_view(const Tensor& base, Shape sizes, Shape strides, int64_t offset);

  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const { return impl().sizes; }
  const Shape& strides() const { return impl().strides; }
  int64_t dim() const { return static_cast<int64_t>(impl().sizes.size()); }
  int64_t size(int64_t d) const;
  int64_t stride(int64_t d) const;
  int64_t offset() const { return impl().offset; }
  int64_t numel() const;
  DType dtype() const { return impl().dtype; }
  Device device() const { return impl().storage->device(); }
  bool is_contiguous() const;
  const std::shared_ptr<Storage>& storage() const { return impl().storage; }
  /// Address of element 0 of this view.
  void* raw_data() const;
  template <typename T>
  T* data() const {
    LOOM_CHECK(dtype_of<T>() == dtype(), "data<{}>(): tensor has dtype {}", dtype_name(dtype_of<T>()),
               dtype_name(dtype()));
    return static_cast<T*>(raw_data());
  }
  /// The value of a one-element tensor, converted to T.
  template <typename T>
  T item() const;
  /// All elements in logical (row-major) order, converted to T.
  template <typename T>
  std::vector<T> to_vector() const;

  // ---- autograd ----
  bool requires_grad() const;
  /// Marks a leaf as trainable; an error on a non-leaf (its flag comes from its inputs).
  Tensor& requires_grad_(bool enabled = true);
  bool is_leaf() const { return impl().grad_fn == nullptr; }
  const std::shared_ptr<Node>& grad_fn() const { return impl().grad_fn; }
  /// The gradient accumulated by backward(); undefined before the first backward.
  Tensor grad() const;
  void set_grad(const Tensor& grad) const;
  /// Reverse-mode pass from this tensor. A non-scalar needs an explicit seed gradient.
  void backward(const Tensor& gradient = {}, bool retain_graph = false, bool create_graph = false) const;
  /// Keep .grad on a non-leaf tensor too.
  void retain_grad() const;
  /// Same storage, cut off from the graph.
  Tensor detach() const;
  /// hook(grad) sees the gradient flowing into this tensor; returning a defined
  /// tensor replaces it. Returns the hook's index.
  size_t register_hook(TensorHook hook) const;
  Tensor& set_name(std::string name) {
    impl().name = std::move(name);
    return *this;
  }
  const std::string& name() const { return impl().name; }

  // ---- methods implemented by ops/ (loom::loom links both) ----
  Tensor reshape(const Shape& shape) const;
  Tensor view(const Shape& shape) const;
  Tensor permute(const Shape& dims) const;
  Tensor transpose(int64_t dim0, int64_t dim1) const;
  Tensor t() const;
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  Tensor slice(int64_t dim, int64_t start, int64_t end, int64_t step = 1) const;
  Tensor select(int64_t dim, int64_t index) const;
  Tensor expand(const Shape& shape) const;
  Tensor squeeze(int64_t dim) const;
  Tensor unsqueeze(int64_t dim) const;
  Tensor contiguous() const;
  Tensor clone() const;
  Tensor to(DType dtype) const;
  Tensor to(Device device) const;
  /// Reductions over dims (all when empty), or over one dim given as an integer.
  Tensor sum(const Shape& dims = {}, bool keepdim = false) const;
  Tensor sum(DimIndex auto dim, bool keepdim = false) const { return sum(Shape{int64_t(dim)}, keepdim); }
  Tensor mean(const Shape& dims = {}, bool keepdim = false) const;
  Tensor mean(DimIndex auto dim, bool keepdim = false) const { return mean(Shape{int64_t(dim)}, keepdim); }
  Tensor amax(const Shape& dims = {}, bool keepdim = false) const;
  Tensor amax(DimIndex auto dim, bool keepdim = false) const { return amax(Shape{int64_t(dim)}, keepdim); }
  Tensor logsumexp(const Shape& dims = {}, bool keepdim = false) const;
  Tensor logsumexp(DimIndex auto dim, bool keepdim = false) const { return logsumexp(Shape{int64_t(dim)}, keepdim); }
  Tensor var(const Shape& dims = {}, bool keepdim = false, int64_t correction = 1) const;
  Tensor var(DimIndex auto dim, bool keepdim = false, int64_t correction = 1) const {
    return var(Shape{int64_t(dim)}, keepdim, correction);
  }
  /// Elementwise and row ops as methods (loom/ops.h has each as a function).
  Tensor softmax(int64_t dim = -1) const;
  Tensor log_softmax(int64_t dim = -1) const;
  Tensor pow(double exponent) const;
  Tensor exp() const;
  Tensor log() const;
  Tensor relu() const;
  Tensor tanh() const;
  Tensor abs() const;

  std::string str() const;  // PyTorch-like printout
  TensorImpl& impl() const {
    if (impl_ == nullptr) undefined_tensor_error();
    return *impl_;
  }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  bool same(const Tensor& other) const { return impl_ == other.impl_; }

 private:
  /// Names the user's line (the op call under way) and the usual cause: a .grad() read
  /// before any backward reached the tensor.
  [[noreturn]] static void undefined_tensor_error();
  std::shared_ptr<TensorImpl> impl_;
};

/// Row-major strides for a shape.
Shape contiguous_strides(const Shape& shape);
int64_t shape_numel(const Shape& shape);
/// Wraps a possibly negative dim into [0, ndim); error names the op. A 0-d tensor has no dims.
int64_t wrap_dim(int64_t dim, int64_t ndim, std::string_view op);
/// The same for ops that, as PyTorch's, take 0 or -1 on a 0-d tensor to mean its one
/// element (reductions, softmax, squeeze, argmax): nullopt there, else wrap_dim's.
std::optional<int64_t> wrap_dim_or_scalar(int64_t dim, int64_t ndim, std::string_view op);

/// Element `linear` (row-major logical index) of an arbitrary strided view.
int64_t strided_offset(int64_t linear, const Shape& sizes, const Shape& strides);

/// Tensors from host values.
Tensor tensor(std::initializer_list<double> values, DType dtype = DType::f32);
Tensor tensor(std::initializer_list<std::initializer_list<double>> rows, DType dtype = DType::f32);
template <typename T>
Tensor from_vector(const std::vector<T>& values, const Shape& shape, TensorOptions options);
/// Without options the dtype is the element type's: doubles make float64, int64_t int64.
template <typename T>
Tensor from_vector(const std::vector<T>& values, const Shape& shape) {
  return from_vector(values, shape, TensorOptions{dtype_of<T>()});
}

std::string format_tensor(const Tensor& t);

/// Sets every element of a contiguous tensor to `value` (converted to its dtype)
/// through its device's Backend::fill; no autograd (ops' fill_ is the checked op, in place on any view).
void device_fill(const Tensor& t, double value);

/// Raw copy of a contiguous tensor's bytes to another device (no autograd; the
/// differentiable version is Tensor::to(Device) in ops/).
Tensor transfer(const Tensor& t, Device device);

}  // namespace loom

template <>
struct fmt::formatter<loom::Tensor> : fmt::formatter<std::string> {
  auto format(const loom::Tensor& t, format_context& ctx) const {
    return fmt::formatter<std::string>::format(loom::format_tensor(t), ctx);
  }
};
