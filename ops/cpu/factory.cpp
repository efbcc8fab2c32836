// CPU kernel of arange (ops/api/factory.cpp): out[i] = i, one loop (it is its own reference).
#include "loom/kernel_table.h"
#include "loom/ops/kernel_signatures.h"
#include "type_lists.h"

namespace loom {

namespace {
template <typename T>
void arange_kernel(const Tensor& out) {
  T* p = out.data<T>();
  for (int64_t i = 0; i < out.numel(); ++i) p[i] = static_cast<T>(i);
}

template <typename T>
void register_for() {
  register_kernel<kernels::ArangeKernel>("arange", DeviceType::cpu, dtype_of<T>(), arange_kernel<T>);
}
}  // namespace

LOOM_KERNELS(cpu_arange) {
  kernels::for_each_type(NumericTypes{}, [](auto tag) { register_for<typename decltype(tag)::type>(); });
}

}  // namespace loom
