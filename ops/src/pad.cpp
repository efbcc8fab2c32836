// pad(x, pads, value): constant padding like torch.nn.functional.pad. pads lists
// {left, right} for the last dim, then for the one before it, and so on:
//   out = value everywhere, with x written at [left_d, left_d + x.size(d)) in each dim
//   dx = g sliced back to that interior (a slice per padded dim)
#include "elementwise.h"

namespace loom {

namespace {
// The plain reference: every output element either maps into x or is `value`.
template <typename T>
void reference_pad(const Tensor& out, const Tensor& x, const Shape& left, double value) {
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
}  // namespace

Tensor pad(const Tensor& x, const Shape& pads, double value, Where where) {
  CallSite site(where);
  detail::require_cpu("pad", x);
  LOOM_CHECK(pads.size() % 2 == 0 && static_cast<int64_t>(pads.size()) <= 2 * x.dim(),
             "pad: pads {} must hold a (left, right) pair for each of at most {} dims (input shape {})", pads,
             x.dim(), x.shape());
  Shape left(x.dim(), 0), out_shape = x.shape();
  for (size_t i = 0; i < pads.size() / 2; ++i) {
    int64_t d = x.dim() - 1 - static_cast<int64_t>(i);
    LOOM_CHECK(pads[2 * i] >= 0 && pads[2 * i + 1] >= 0, "pad: negative padding {} is not supported (shape {})",
               pads, x.shape());
    left[d] = pads[2 * i];
    out_shape[d] += pads[2 * i] + pads[2 * i + 1];
  }
  Tensor out = Tensor::empty(out_shape, {x.dtype(), x.device()});
  if (kernel_mode() == KernelMode::reference) {
    dispatch_all(x.dtype(), "pad", [&](auto tag) { reference_pad<typename decltype(tag)::type>(out, x, left, value); });
  } else {
    NoGradGuard kernel_internals;  // fill, then copy into the interior view
    fill_(out, value);
    Tensor interior = out;
    for (int64_t d = 0; d < x.dim(); ++d)
      if (out_shape[d] != x.shape()[d]) interior = narrow(interior, d, left[d], x.shape()[d]);
    copy_(interior, x);
  }
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
    .call = [](const OpArgs& x) { return pad(x[0], {1, 2}, 0.5); },
    .samples = {unary_sample({3, 4}, Domain::any, "last dim (1,2) value=0.5"),
                {{{{2, 3, 4}}}, [](const OpArgs& x) { return pad(x[0], {1, 0, 2, 1}); }, "last 2 dims (1,0),(2,1)"},
                {{{{2, 3}}}, [](const OpArgs& x) { return pad(x[0], {0, 1, 1, 0}, -1.0); }, "all dims value=-1"}},
};

}  // namespace loom
