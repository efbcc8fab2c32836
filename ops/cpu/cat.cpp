// CPU kernels of cat (ops/src/cat.cpp): each input copied by the elementwise
// loop engine into its slice of out; and the plain reference that finds each
// output element's input by walking the offsets.
#include "loom/kernel_table.h"
#include "loom/kernels/functors.h"
#include "loom/kernels/loops.h"
#include "loom/ops/kernel_signatures.h"
#include "type_lists.h"

namespace loom {

namespace {
// Fast: input k into the view of out at [offset_k, offset_k + size_k) along dim.
template <typename T>
void cat_fast(const Tensor& out, const std::vector<Tensor>& tensors, int64_t dim) {
  int64_t offset = 0;
  for (const Tensor& t : tensors) {
    if (t.shape()[dim] > 0) {
      Tensor slice = Tensor::make_view(out, t.shape(), out.strides(), out.offset() + offset * out.strides()[dim]);
      kernels::unary_loop<T, T>(slice, t, fn::Cast<T>{});
    }
    offset += t.shape()[dim];
  }
}

// The plain reference: each output element finds its input by walking the offsets.
template <typename T>
void cat_reference(const Tensor& out, const std::vector<Tensor>& tensors, int64_t dim) {
  T* po = out.data<T>();
  for (int64_t p = 0; p < out.numel(); ++p) {
    Shape c(out.dim());
    for (int64_t d = out.dim() - 1, rest = p; d >= 0; --d) {
      c[d] = rest % out.shape()[d];
      rest /= out.shape()[d];
    }
    size_t k = 0;
    while (c[dim] >= tensors[k].shape()[dim]) c[dim] -= tensors[k++].shape()[dim];
    const T* pk = static_cast<const T*>(tensors[k].storage()->data()) + tensors[k].offset();
    int64_t off = 0;
    for (int64_t d = 0; d < out.dim(); ++d) off += c[d] * tensors[k].strides()[d];
    po[p] = pk[off];
  }
}

template <typename T>
void register_for() {
  register_kernel<kernels::CatKernel>("cat", DeviceType::cpu, dtype_of<T>(), cat_fast<T>, cat_reference<T>);
}
}  // namespace

LOOM_KERNELS(cpu_cat) {
  kernels::for_each_type(AllTypes{}, [](auto tag) { register_for<typename decltype(tag)::type>(); });
}

}  // namespace loom
