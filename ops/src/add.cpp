// add(a, b) = a + b, broadcasting.      da = g,  db = g  (each summed back to its shape)
#include "elementwise.h"

namespace loom {

Tensor add(const Tensor& a, const Tensor& b, Where where) {
  CallSite site(where);
  Tensor out = detail::binary_op("add", a, b, detail::DTypes::numeric);
  return record("add", {a, b}, out, [](BackwardContext& c, const Tensor& g) -> detail::Grads {
    return {c.needs(0) ? sum_to(g, c.input_shape(0)) : Tensor(), c.needs(1) ? sum_to(g, c.input_shape(1)) : Tensor()};
  });
}

// The autograd engine sums gradients with this op (core cannot depend on ops).
static const bool gradient_functions_registered = [] {
  set_gradient_functions([](const Tensor& a, const Tensor& b) { return add(a, b); },
                         [](const Tensor& g) { return clone(g); });
  return true;
}();

namespace {
// The residual add, and the bias adds of the Linear layers (backward: da = G, dbias = row sum of G).
std::vector<BenchCase> add_bench() {
  using namespace bench;
  const double n = rows * 512.0;
  std::vector<BenchCase> cases = {{.label = "add 1536x512 + 1536x512",
                                   .inputs = {{{rows, 512}}, {{rows, 512}}},
                                   .forward_work = 3 * n * f32_bytes,
                                   .formula = "fwd 4*(2n + n); bwd passes G through (no traffic counted)"}};
  for (int64_t c : {512, 2048})
    cases.push_back({.label = fmt::format("add {}x{} + {} (row broadcast)", rows, c, c),
                     .inputs = {{{rows, c}}, {{c}}},
                     .forward_work = (2.0 * rows * c + c) * f32_bytes,
                     .backward_work = (1.0 * rows * c + c) * f32_bytes,
                     .formula = "fwd 4*(2n + C); bwd 4*(n + C) (da = G, dbias = row sum of G)"});
  return cases;
}
}  // namespace

LOOM_OP(add){
    .name = "add",
    .formula = "y = a + b",
    .derivative = "da = sum_to(g, a.shape),  db = sum_to(g, b.shape)",
    .shape_rule = "broadcast(a.shape, b.shape)",
    .call = [](const OpArgs& x) { return add(x[0], x[1]); },
    .samples = {binary_sample({4, 7}, {4, 7}), binary_sample({4, 7}, {7}, Domain::any, "row broadcast"),
                binary_sample({2, 1, 5}, {3, 1}, Domain::any, "both broadcast"),
                binary_sample({3, 4}, {}, Domain::any, "0-d")},
    .bench = add_bench(),
};

}  // namespace loom
