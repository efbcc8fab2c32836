// where(cond, a, b) = cond ? a : b, all three broadcast together; cond is bool.
//                                       da = where(cond, g, 0),  db = where(cond, 0, g)
//                                       (each summed back to its input's shape)
#include "elementwise.h"

namespace loom {

// (The parameter `where` is the caller's line; calls to this op inside are qualified.)
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b, Where where) {
  if (a.dtype() != b.dtype()) {  // as PyTorch: the operands promoted to one dtype
    const DType common = detail::result_type(a, b);
    return loom::where(cond, to_dtype(a, common), to_dtype(b, common), where);
  }
  CallSite site(where);
  constexpr std::string_view op = "where";
  LOOM_CHECK(cond.dtype() == DType::b8, "where: condition must be bool, got {} (compare with eq/lt/... to get one)",
             dtype_name(cond.dtype()));
  LOOM_CHECK(cond.device() == a.device(), "where: condition is on {} and operands on {}", cond.device(), a.device());
  detail::check_same_kind(op, a, b);
  Shape shape = kernels::broadcast_shapes(kernels::broadcast_shapes(cond.shape(), a.shape(), op), b.shape(), op);
  Tensor out = Tensor::empty(shape, {a.dtype(), a.device()});
  detail::kernel_for<kernels::TernaryKernel>(op, a)(out, cond, a, b);
  return record(op, {a, b}, out, [cond](BackwardContext& c, const Tensor& g) -> detail::Grads {
    Tensor zero = detail::constant_like(g, 0.0);
    return {c.needs(0) ? sum_to(loom::where(cond, g, zero), c.input_shape(0)) : Tensor(),
            c.needs(1) ? sum_to(loom::where(cond, zero, g), c.input_shape(1)) : Tensor()};
  });
}

// The condition is a random bool input (not differentiated); a and b are the
// differentiable inputs, so the broadcast variant expands them, not cond.
static InputSpec bool_input(Shape shape) { return {std::move(shape), Domain::any, DType::b8, 2, false}; }

LOOM_OP(where){
    .name = "where",
    .formula = "y = cond ? a : b   (cond bool)",
    .derivative = "da = sum_to(where(cond, g, 0));  db = sum_to(where(cond, 0, g))",
    .shape_rule = "broadcast(cond.shape, a.shape, b.shape)",
    .call = [](const OpArgs& x) { return where(x[0], x[1], x[2]); },
    .samples = {{{bool_input({4, 7}), {{4, 7}}, {{4, 7}}}, {}, "[4,7] all"},
                {{bool_input({7}), {{4, 7}}, {{4, 1}}}, {}, "cond [7], b [4,1]"},
                {{bool_input({2, 3, 5}), {{3, 1}}, {{}}}, {}, "a [3,1], b 0-d"},
                {{bool_input({4, 1}), {{2, 1, 7}}, {{7}}}, {}, "all broadcast"}},
    .schema = "where(Tensor condition, Tensor input, Tensor other) -> Tensor",
};

}  // namespace loom
