// triu(x, k): x where column - row >= k in the last two dims, 0 elsewhere.
// tril(x, k): x where column - row <= k, 0 elsewhere.
//   dx = triu(g, k) (resp. tril(g, k)): the mask is constant, so the op is linear.
// Both share one kernel (a keep-predicate per (row, column)), so they live together.
// causal_mask(n): bool [n, n], true where column > row: the positions a decoder masks
// (triu of all-true with k = 1, made on the device).
// CPU kernels: ops/cpu/triu.cpp.
#include "elementwise.h"

namespace loom {

namespace {
Tensor triangle(std::string_view op, const Tensor& x, int64_t diagonal) {
  LOOM_CHECK(x.dim() >= 2, "{}: expected at least 2 dims, got shape {}", op, x.shape());
  Tensor out = Tensor::empty(x.shape(), {x.dtype(), x.device()});
  detail::kernel_for<kernels::TriangleKernel>(op, x)(out, x, diagonal);
  return out;
}
}  // namespace

Tensor triu(const Tensor& x, int64_t diagonal, Where where) {
  CallSite site(where);
  Tensor out = triangle("triu", x, diagonal);
  return record("triu", {x}, out,
                [diagonal](BackwardContext&, const Tensor& g) -> detail::Grads { return {triu(g, diagonal)}; });
}

Tensor tril(const Tensor& x, int64_t diagonal, Where where) {
  CallSite site(where);
  Tensor out = triangle("tril", x, diagonal);
  return record("tril", {x}, out,
                [diagonal](BackwardContext&, const Tensor& g) -> detail::Grads { return {tril(g, diagonal)}; });
}

Tensor causal_mask(int64_t n, Device device) {
  LOOM_CHECK(n >= 0, "causal_mask: size must be non-negative, got {}", n);
  NoGradGuard constant;
  return triu(full({n, n}, 1.0, {DType::b8, device}), 1);
}

LOOM_OP(triu){
    .name = "triu",
    .formula = "y = x where column - row ≥ k, else 0   (last two dims)",
    .derivative = "dx = triu(g, k)   (a constant mask: linear)",
    .shape_rule = "y has x's shape",
    .call = [](const OpArgs& x) { return triu(x[0]); },
    .samples = {unary_sample({4, 5}, Domain::any, "k=0"),
                {.inputs = {{{2, 4, 4}}}, .label = "batched k=1", .attributes = {{"diagonal", int64_t{1}}}},
                {.inputs = {{{5, 3}}}, .label = "k=-2", .attributes = {{"diagonal", int64_t{-2}}}}},
    .schema = "triu(Tensor input, int diagonal=0) -> Tensor",
    .invoke = [](const Arguments& a) { return triu(a.tensor("input"), a.integer("diagonal")); },
};

LOOM_OP(tril){
    .name = "tril",
    .formula = "y = x where column - row ≤ k, else 0   (last two dims)",
    .derivative = "dx = tril(g, k)   (a constant mask: linear)",
    .shape_rule = "y has x's shape",
    .call = [](const OpArgs& x) { return tril(x[0]); },
    .samples = {unary_sample({4, 5}, Domain::any, "k=0"),
                {.inputs = {{{2, 4, 4}}}, .label = "batched k=-1", .attributes = {{"diagonal", int64_t{-1}}}},
                {.inputs = {{{3, 5}}}, .label = "k=2", .attributes = {{"diagonal", int64_t{2}}}}},
    .schema = "tril(Tensor input, int diagonal=0) -> Tensor",
    .invoke = [](const Arguments& a) { return tril(a.tensor("input"), a.integer("diagonal")); },
};

}  // namespace loom
