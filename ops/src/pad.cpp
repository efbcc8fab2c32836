// pad(x, pads, value): constant padding like torch.nn.functional.pad. pads lists
// {left, right} for the last dim, then for the one before it, and so on:
//   out = value everywhere, with x written at [left_d, left_d + x.size(d)) in each dim
//   dx = g sliced back to that interior (a slice per padded dim)
// CPU kernels: ops/cpu/pad.cpp.
#include <algorithm>

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
    .samples = {{.inputs = {{{3, 4}}},
                 .label = "last dim (1,2) value=0.5",
                 .attributes = {{"pad", Shape{1, 2}}, {"value", 0.5}}},
                {.inputs = {{{2, 3, 4}}},
                 .label = "last 2 dims (1,0),(2,1)",
                 .attributes = {{"pad", Shape{1, 0, 2, 1}}}},
                {.inputs = {{{2, 3}}},
                 .label = "all dims value=-1",
                 .attributes = {{"pad", Shape{0, 1, 1, 0}}, {"value", -1.0}}},
                {.inputs = {{{3, 4}}},
                 .label = "negative: crops (-1,2),(1,-2)",
                 .attributes = {{"pad", Shape{-1, 2, 1, -2}}}}},
    .schema = "pad(Tensor input, int[] pad, str mode='constant', float? value=None) -> Tensor",
    // As torch.nn.functional.pad: a negative amount crops that side first.
    .invoke =
        [](const Arguments& a) {
          LOOM_CHECK(a.text("mode") == "constant", "pad: only mode='constant' is supported, not '{}'", a.text("mode"));
          Tensor x = a.tensor("input");
          Shape pads = a.integers("pad");
          LOOM_CHECK(pads.size() % 2 == 0 && static_cast<int64_t>(pads.size()) <= 2 * x.dim(),
                     "pad: pad {} must hold a (left, right) pair for each of at most {} dims (input shape {})", pads,
                     x.dim(), x.shape());
          for (size_t i = 0; i < pads.size(); i += 2) {
            const int64_t d = x.dim() - 1 - static_cast<int64_t>(i / 2);
            const int64_t crop_left = std::max<int64_t>(0, -pads[i]), crop_right = std::max<int64_t>(0, -pads[i + 1]);
            LOOM_CHECK(crop_left + crop_right <= x.shape()[d], "pad: pad {} crops more than dim {}'s {} elements", pads,
                       d, x.shape()[d]);
            if (crop_left + crop_right > 0) x = narrow(x, d, crop_left, x.shape()[d] - crop_left - crop_right);
            pads[i] = std::max<int64_t>(0, pads[i]), pads[i + 1] = std::max<int64_t>(0, pads[i + 1]);
          }
          return pad(x, pads, a.is_none("value") ? 0.0 : a.number("value"));
        },
};

}  // namespace loom
