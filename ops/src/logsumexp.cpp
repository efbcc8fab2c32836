// logsumexp(x, dims, keepdim) = m + log(sum(exp(x - m))),  m = max of x over dims
//   dx = g * exp(x - out) = g * softmax(x)     (over dims)
// Subtracting the max keeps exp from overflowing (logsumexp([1000, 1000]) is
// 1000 + log 2, not inf). The fast kernel keeps a running max and rescales its
// sum when the max grows (one pass, any thread count gives the same bits); the
// reference kernel is the plain two-pass formula. The backward uses the output
// through the graph, so it differentiates again.
// CPU kernels: ops/cpu/logsumexp.cpp.
#include "elementwise.h"

namespace loom {

Tensor logsumexp(const Tensor& x, const Shape& dims, bool keepdim, Where where) {
  CallSite site(where);
  detail::check_dtype("logsumexp", x, detail::DTypes::floating);
  Shape reduce_dims = kernels::normalize_dims(dims, x.dim(), "logsumexp");
  Tensor out = Tensor::empty(kernels::reduced_shape(x.shape(), reduce_dims, keepdim), {x.dtype(), x.device()});
  detail::kernel_for<kernels::ReduceKernel>("logsumexp", x)(out, x, reduce_dims);
  return record(
      "logsumexp", {x}, out,
      [x, reduce_dims, keepdim](BackwardContext& c, const Tensor& g) -> detail::Grads {
        Shape kept = kernels::reduced_shape(x.shape(), reduce_dims, true);
        Tensor out_kept = keepdim ? c.out() : reshape(c.out(), kept);
        Tensor g_kept = keepdim ? g : reshape(g, kept);
        return {mul(g_kept, exp(sub(x, out_kept)))};  // softmax(x) = exp(x - logsumexp(x))
      },
      SavedOutput::yes);
}

static Sample lse_sample(Shape shape, Shape dims, bool keepdim, std::string label) {
  return {.inputs = {{std::move(shape)}},
          .label = std::move(label),
          .composed = [dims, keepdim](const OpArgs& x) { return log(sum(exp(x[0]), dims, keepdim)); },
          .attributes = {{"dim", dims}, {"keepdim", keepdim}}};
}

LOOM_OP(logsumexp){
    .name = "logsumexp",
    .formula = "y = m + log Σ exp(x - m),  m = max of x over dims",
    .derivative = "dx = g·exp(x - y) = g·softmax(x)",
    .shape_rule = "x.shape without dims (size 1 each if keepdim)",
    .call = [](const OpArgs& x) { return logsumexp(x[0]); },
    .samples = {lse_sample({4, 7}, {0, 1}, false, "all (dims={0,1})"), lse_sample({4, 7}, {1}, false, "dims={1}"),
                lse_sample({4, 7}, {0}, true, "dims={0} keepdim"), lse_sample({2, 3, 5}, {0, 2}, false, "dims={0,2}"),
                lse_sample({2, 3, 5}, {-1}, true, "dims={-1} keepdim")},
    .schema = "logsumexp(Tensor input, int[1] dim, bool keepdim=False) -> Tensor",
    .invoke = [](const Arguments& a) { return logsumexp(a.tensor("input"), a.integers("dim"), a.boolean("keepdim")); },
};

}  // namespace loom
