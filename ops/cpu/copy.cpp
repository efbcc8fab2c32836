// CPU kernel of copy_/clone/to_dtype/contiguous (ops/src/copy.cpp): the loop
// engine with a cast as the functor, or the plain loop. Every dtype pair,
// bfloat16 included (float32 -> bfloat16 rounds to nearest even).
#include <type_traits>

#include "bf16_rounding.h"
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
    if constexpr (Fast && std::is_same_v<In, float> && std::is_same_v<Out, bfloat16>) {
      if (dst.is_contiguous() && src.is_contiguous()) {  // the bf16 matmul operands' rounding: the fast rows
        const float* from = static_cast<const float*>(src.raw_data());
        bfloat16* to = static_cast<bfloat16*>(dst.raw_data());
        kernels::parallel_ranges(dst.numel(), [&](int64_t begin, int64_t end) {
          detail::round_rows_to_bf16(from + begin, 1, end - begin, 0, to + begin);
        });
        return;
      }
    }
    if constexpr (Fast)
      kernels::unary_loop<In, Out>(dst, src, fn::Cast<Out>{});
    else
      kernels::reference_unary<In, Out>(dst, src, fn::Cast<Out>{});
  });
}

template <typename In>
void register_for() {
  register_kernel<kernels::CopyKernel>("copy", DeviceType::cpu, dtype_of<In>(), copy_kernel<In, true>,
                                       copy_kernel<In, false>);
}
}  // namespace

LOOM_KERNELS(cpu_copy) {
  kernels::for_each_type(StorageTypes{}, [](auto tag) { register_for<typename decltype(tag)::type>(); });
}

}  // namespace loom
