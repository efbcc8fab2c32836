// CPU kernels of pad (ops/src/pad.cpp): fill, then the copy kernel's loop into
// the interior view; and the plain reference that maps every output element.
#include <algorithm>

#include "loom/kernel_table.h"
#include "loom/kernels/functors.h"
#include "loom/kernels/loops.h"
#include "loom/ops/kernel_signatures.h"
#include "type_lists.h"

namespace loom {

namespace {
// Fast: out = value (a fresh contiguous out), then x copied into the view of
// out at [left[d], left[d] + x.size(d)) by the elementwise loop engine.
template <typename T>
void pad_fast(const Tensor& out, const Tensor& x, const Shape& left, double value) {
  std::fill_n(out.data<T>(), out.numel(), static_cast<T>(value));
  int64_t offset = out.offset();
  for (int64_t d = 0; d < x.dim(); ++d) offset += left[d] * out.strides()[d];
  Tensor interior = Tensor::make_view(out, x.shape(), out.strides(), offset);
  kernels::unary_loop<T, T>(interior, x, fn::Cast<T>{});
}

// The plain reference: every output element either maps into x or is `value`.
template <typename T>
void pad_reference(const Tensor& out, const Tensor& x, const Shape& left, double value) {
  const T* px = static_cast<const T*>(x.storage()->data()) + x.offset();
  T* po = out.data<T>();
  for (int64_t p = 0; p < out.numel(); ++p) {
    int64_t rest = p, off = 0;
    bool inside = true;
    for (int64_t d = out.dim() - 1; d >= 0; --d) {
      int64_t c = rest % out.shape()[d] - left[d];
      rest /= out.shape()[d];
      inside = inside && c >= 0 && c < x.shape()[d];
      off += c * x.strides()[d];
    }
    po[p] = inside ? px[off] : static_cast<T>(value);
  }
}

template <typename T>
void register_for() {
  register_kernel<kernels::PadKernel>("pad", DeviceType::cpu, dtype_of<T>(), pad_fast<T>, pad_reference<T>);
}
}  // namespace

LOOM_KERNELS(cpu_pad) {
  kernels::for_each_type(AllTypes{}, [](auto tag) { register_for<typename decltype(tag)::type>(); });
}

}  // namespace loom
