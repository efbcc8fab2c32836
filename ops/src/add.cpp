// add(a, b) = a + b, broadcasting.      da = g,  db = g  (each summed back to its shape)
#include "elementwise.h"

namespace loom {

Tensor add(const Tensor& a, const Tensor& b, Where where) {
  if (a.dtype() != b.dtype()) return detail::call_promoted(add, a, b, detail::result_type(a, b), where);
  CallSite site(where);
  Tensor out = detail::binary_op("add", a, b, detail::DTypes::numeric);
  return record("add", {a, b}, out, [](BackwardContext& c, const Tensor& g) -> detail::Grads {
    return {c.needs(0) ? sum_to(g, c.input_shape(0)) : Tensor(), c.needs(1) ? sum_to(g, c.input_shape(1)) : Tensor()};
  });
}

// The autograd engine sums gradients with this op, or with its kernel in place
// (each element read, then written: out may be a) (core cannot depend on ops).
static const bool gradient_functions_registered = [] {
  set_gradient_functions([](const Tensor& a, const Tensor& b) { return add(a, b); },
                         [](const Tensor& into, const Tensor& g) {
                           WholeKernels whole;  // a .grad half summed would outlive an interrupt
                           detail::kernel_for<kernels::BinaryKernel>("add", into)(into, into, g);
                         },
                         [](const Tensor& g) { return clone(g); });
  return true;
}();

LOOM_OP(add){
    .name = "add",
    .formula = "y = a + b",
    .derivative = "da = sum_to(g, a.shape),  db = sum_to(g, b.shape)",
    .shape_rule = "broadcast(a.shape, b.shape)",
    .call = [](const OpArgs& x) { return add(x[0], x[1]); },
    .samples = {binary_sample({4, 7}, {4, 7}), binary_sample({4, 7}, {7}, Domain::any, "row broadcast"),
                binary_sample({2, 1, 5}, {3, 1}, Domain::any, "both broadcast"),
                binary_sample({3, 4}, {}, Domain::any, "0-d")},
    .schema = "add(Tensor input, Tensor other, *, float alpha=1) -> Tensor",
    .invoke =
        [](const Arguments& a) {
          return add(a.tensor("input"), detail::times_alpha(a.tensor("other"), a.number("alpha"), "add"));
        },
};

}  // namespace loom
