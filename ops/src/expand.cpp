// expand(x, shape): repeats size-1 dims (and adds leading ones) without copying:
// the new dims get stride 0.                   dx = sum_to(g, x.shape)
#include "elementwise.h"

namespace loom {

Tensor expand(const Tensor& x, const Shape& shape, Where where) {
  CallSite site(where);
  LOOM_CHECK(shape.size() >= static_cast<size_t>(x.dim()), "expand: cannot expand shape {} to {} (fewer dims)",
             x.shape(), shape);
  size_t lead = shape.size() - x.dim();
  Shape sizes(shape.size()), strides(shape.size(), 0);
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i < lead) {
      LOOM_CHECK(shape[i] >= 0, "expand: cannot expand shape {} to {}", x.shape(), shape);
      sizes[i] = shape[i];
      continue;
    }
    int64_t have = x.shape()[i - lead], want = shape[i] == -1 ? have : shape[i];
    LOOM_CHECK(have == want || have == 1, "expand: cannot expand shape {} to {} (dim {} is {}, not 1)", x.shape(),
               shape, i, have);
    sizes[i] = want;
    strides[i] = have == want ? x.strides()[i - lead] : 0;
  }
  if (sizes == x.shape()) return x;
  Tensor out = Tensor::make_view(x, sizes, strides, x.offset());
  Shape input_shape = x.shape();
  return record("expand", {x}, out,
                [input_shape](BackwardContext&, const Tensor& g) -> detail::Grads { return {sum_to(g, input_shape)}; });
}

LOOM_OP(expand){
    .name = "expand",
    .formula = "y = x repeated along its size-1 dims (and new leading dims), stride 0",
    .derivative = "dx = sum_to(g, x.shape)",
    .shape_rule = "x.shape broadcast to the given shape",
    .call =
        [](const OpArgs& x) {
          return expand(x[0], {2, 4, 3});
        },
    .samples = {{.inputs = {{{4, 1}}}, .label = "[4,1]->[2,4,3]", .attributes = {{"size", Shape{2, 4, 3}}}},
                {.inputs = {{{4, 1}}}, .label = "[4,1]->[-1,5]", .attributes = {{"size", Shape{-1, 5}}}}},
    .schema = "expand(Tensor input, int[] size) -> Tensor",
    .invoke = [](const Arguments& a) { return expand(a.tensor("input"), a.integers("size")); },
};

}  // namespace loom
