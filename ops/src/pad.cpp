// pad(x, pads, value): constant padding like torch.nn.functional.pad. pads lists
// {left, right} for the last dim, then for the one before it, and so on:
//   out = value everywhere, with x written at [left_d, left_d + x.size(d)) in each dim
//   dx = g sliced back to that interior (a slice per padded dim)
// CPU kernels: ops/cpu/pad.cpp.
#include "elementwise.h"

namespace loom {

Tensor pad(const Tensor& x, const Shape& pads, double value, Where where) {
  CallSite site(where);
  LOOM_CHECK(pads.size() % 2 == 0 && static_cast<int64_t>(pads.size()) <= 2 * x.dim(),
             "pad: pads {} must hold a (left, right) pair for each of at most {} dims (input shape {})", pads, x.dim(),
             x.shape());
  Shape left(x.dim(), 0), out_shape = x.shape();
  for (size_t i = 0; i < pads.size() / 2; ++i) {
    int64_t d = x.dim() - 1 - static_cast<int64_t>(i);
    LOOM_CHECK(pads[2 * i] >= 0 && pads[2 * i + 1] >= 0, "pad: negative padding {} is not supported (shape {})", pads,
               x.shape());
    left[d] = pads[2 * i];
    out_shape[d] += pads[2 * i] + pads[2 * i + 1];
  }
  Tensor out = Tensor::empty(out_shape, {x.dtype(), x.device()});
  detail::kernel_for<kernels::PadKernel>("pad", x)(out, x, left, value);
  Shape sizes = x.shape();
  return record("pad", {x}, out, [left, sizes](BackwardContext&, const Tensor& g) -> detail::Grads {
    Tensor dx = g;
    for (int64_t d = 0; d < static_cast<int64_t>(sizes.size()); ++d)
      if (g.shape()[d] != sizes[d]) dx = slice(dx, d, left[d], left[d] + sizes[d]);
    return {dx};
  });
}

LOOM_OP(pad){
    .name = "pad",
    .formula = "y = value everywhere, x written at [left_d, left_d + x.size(d)) of each padded dim",
    .derivative = "dx = g sliced back to that interior",
    .shape_rule = "size(d) + left_d + right_d in each padded dim",
    .call =
        [](const OpArgs& x) {
          return pad(x[0], {1, 2}, 0.5);
        },
    .samples = {unary_sample({3, 4}, Domain::any, "last dim (1,2) value=0.5"),
                {{{{2, 3, 4}}},
                 [](const OpArgs& x) {
                   return pad(x[0], {1, 0, 2, 1});
                 },
                 "last 2 dims (1,0),(2,1)"},
                {{{{2, 3}}},
                 [](const OpArgs& x) {
                   return pad(x[0], {0, 1, 1, 0}, -1.0);
                 },
                 "all dims value=-1"}},
};

}  // namespace loom
