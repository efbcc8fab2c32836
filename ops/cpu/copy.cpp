// CPU kernel of copy_/clone/to_dtype/contiguous (ops/src/copy.cpp): the loop
// engine with a cast as the functor, or the plain loop. Every dtype pair,
// bfloat16 included (float32 -> bfloat16 rounds to nearest even).
#include "loom/kernel_table.h"
#include "loom/kernels/functors.h"
#include "loom/kernels/loops.h"
#include "loom/ops/kernel_signatures.h"
#include "type_lists.h"

namespace loom {

namespace {
template <typename In, bool Fast>
void copy_kernel(const Tensor& dst, const Tensor& src) {
  dispatch_storage(dst.dtype(), "copy", [&](auto out_tag) {
    using Out = typename decltype(out_tag)::type;
    if constexpr (Fast) kernels::unary_loop<In, Out>(dst, src, fn::Cast<Out>{});
    else kernels::reference_unary<In, Out>(dst, src, fn::Cast<Out>{});
  });
}

template <typename In>
void register_for() {
  register_kernel<kernels::CopyKernel>("copy", DeviceType::cpu, dtype_of<In>(), copy_kernel<In, true>,
                                       copy_kernel<In, false>);
}
}  // namespace

LOOM_KERNELS(cpu_copy) {
  kernels::for_each_type(kernels::StorageTypes{}, [](auto tag) { register_for<typename decltype(tag)::type>(); });
}

}  // namespace loom
