// eq, ne, lt, le, gt, ge(a, b): elementwise comparisons, broadcasting, bool results.
// Piecewise constant with a bool output, so there is no gradient: nothing is recorded.
// Six ops of one shape share this file; each has its own functor in kernels/functors.h (ops/cpu/elementwise.cpp).
#include "elementwise.h"

namespace loom {

namespace {
Tensor compare(std::string_view op, const Tensor& a, const Tensor& b, Where where) {
  CallSite site(where);
  if (a.dtype() == b.dtype()) return detail::compare_op(op, a, b);
  const DType common = detail::result_type(a, b);  // as PyTorch: an int64 tensor against 0.5 compares as floats
  return detail::compare_op(op, to_dtype(a, common), to_dtype(b, common));
}
}  // namespace

Tensor eq(const Tensor& a, const Tensor& b, Where where) { return compare("eq", a, b, where); }
Tensor ne(const Tensor& a, const Tensor& b, Where where) { return compare("ne", a, b, where); }
Tensor lt(const Tensor& a, const Tensor& b, Where where) { return compare("lt", a, b, where); }
Tensor le(const Tensor& a, const Tensor& b, Where where) { return compare("le", a, b, where); }
Tensor gt(const Tensor& a, const Tensor& b, Where where) { return compare("gt", a, b, where); }
Tensor ge(const Tensor& a, const Tensor& b, Where where) { return compare("ge", a, b, where); }

// Forward-only checks (fast vs reference kernel, non-contiguous inputs). Random
// floats are almost never equal, so one sample draws small integers: many ties.
static std::vector<Sample> compare_samples() {
  return {binary_sample({4, 7}, {4, 7}),
          binary_sample({4, 7}, {7}, Domain::any, "row broadcast"),
          binary_sample({2, 1, 5}, {3, 1}, Domain::any, "both broadcast"),
          {{{{4, 7}, Domain::any, DType::i64, 3}, {{7}, Domain::any, DType::i64, 3}}, {}, "int64 in [0,3): ties"},
          {{{{4, 7}, Domain::any, DType::b8, 2}, {{4, 7}, Domain::any, DType::b8, 2}}, {}, "bool"}};
}

LOOM_OP(eq){
    .name = "eq",
    .formula = "y = (a == b)",
    .derivative = "none: a bool output",
    .shape_rule = "broadcast(a.shape, b.shape), bool",
    .call = [](const OpArgs& x) { return eq(x[0], x[1]); },
    .samples = compare_samples(),
    .differentiable = false,
    .schema = "eq(Tensor input, Tensor other) -> Tensor",
};
LOOM_OP(ne){
    .name = "ne",
    .formula = "y = (a != b)",
    .derivative = "none: a bool output",
    .shape_rule = "broadcast(a.shape, b.shape), bool",
    .call = [](const OpArgs& x) { return ne(x[0], x[1]); },
    .samples = compare_samples(),
    .differentiable = false,
    .schema = "ne(Tensor input, Tensor other) -> Tensor",
};
LOOM_OP(lt){
    .name = "lt",
    .formula = "y = (a < b)",
    .derivative = "none: a bool output",
    .shape_rule = "broadcast(a.shape, b.shape), bool",
    .call = [](const OpArgs& x) { return lt(x[0], x[1]); },
    .samples = compare_samples(),
    .differentiable = false,
    .schema = "lt(Tensor input, Tensor other) -> Tensor",
};
LOOM_OP(le){
    .name = "le",
    .formula = "y = (a <= b)",
    .derivative = "none: a bool output",
    .shape_rule = "broadcast(a.shape, b.shape), bool",
    .call = [](const OpArgs& x) { return le(x[0], x[1]); },
    .samples = compare_samples(),
    .differentiable = false,
    .schema = "le(Tensor input, Tensor other) -> Tensor",
};
LOOM_OP(gt){
    .name = "gt",
    .formula = "y = (a > b)",
    .derivative = "none: a bool output",
    .shape_rule = "broadcast(a.shape, b.shape), bool",
    .call = [](const OpArgs& x) { return gt(x[0], x[1]); },
    .samples = compare_samples(),
    .differentiable = false,
    .schema = "gt(Tensor input, Tensor other) -> Tensor",
};
LOOM_OP(ge){
    .name = "ge",
    .formula = "y = (a >= b)",
    .derivative = "none: a bool output",
    .shape_rule = "broadcast(a.shape, b.shape), bool",
    .call = [](const OpArgs& x) { return ge(x[0], x[1]); },
    .samples = compare_samples(),
    .differentiable = false,
    .schema = "ge(Tensor input, Tensor other) -> Tensor",
};

}  // namespace loom
