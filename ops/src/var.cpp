// var(x, dims, keepdim, correction) = sum((x - mean)^2) / (N - correction)
//   (N = elements per output; correction = 1: unbiased, 0: population)
//   dx = g * 2 (x - mean) / (N - correction)
// Two passes (mean first, then squared deviations): one-pass sum(x^2) - N mean^2
// cancels catastrophically when |mean| >> std. The backward is written with ops
// (mean, sub, mul), so it differentiates again.
// CPU kernels: ops/cpu/var.cpp.
#include "elementwise.h"

namespace loom {

Tensor var(const Tensor& x, const Shape& dims, bool keepdim, int64_t correction, Where where) {
  CallSite site(where);
  detail::check_dtype("var", x, detail::DTypes::floating);
  Shape reduce_dims = kernels::normalize_dims(dims, x.dim(), "var");
  int64_t count = 1;
  for (int64_t d : reduce_dims) count *= x.shape()[d];
  // As in PyTorch: N <= correction divides by zero (inf or nan), it is not an error.
  double divisor = static_cast<double>(std::max<int64_t>(0, count - correction));
  Shape kept = kernels::reduced_shape(x.shape(), reduce_dims, true);
  Tensor out = Tensor::empty(kernels::reduced_shape(x.shape(), reduce_dims, keepdim), {x.dtype(), x.device()});
  {
    NoGradGuard kernel_internals;  // pass 1: the means (ops); pass 2: the kernel's squares
    Tensor centred = sub(x, mean(x, reduce_dims, true));
    detail::kernel_for<kernels::VarKernel>("var", x)(out, centred, reduce_dims, divisor);
  }
  return record("var", {x}, out,
                [x, reduce_dims, keepdim, kept, divisor](BackwardContext&, const Tensor& g) -> detail::Grads {
                  Tensor centred = sub(x, mean(x, reduce_dims, true));
                  Tensor scale = scalar_tensor(2.0 / divisor, {x.dtype(), x.device()});
                  return {mul(keepdim ? g : reshape(g, kept), mul(centred, scale))};
                });
}

static Sample var_sample(Shape shape, Shape dims, bool keepdim, int64_t correction, std::string label) {
  return {.inputs = {{std::move(shape)}},
          .label = std::move(label),
          .composed =
              [=](const OpArgs& x) {
                Shape d = kernels::normalize_dims(dims, x[0].dim(), "var");
                int64_t n = 1;
                for (int64_t i : d) n *= x[0].shape()[i];
                Tensor centred = x[0] - mean(x[0], dims, true);
                return sum(centred * centred, dims, keepdim) / static_cast<double>(n - correction);
              },
          .attributes = {{"dim", dims.empty() ? ArgumentValue{} : ArgumentValue{dims}},  // None: all
                         {"keepdim", keepdim},
                         {"correction", correction}}};
}

LOOM_OP(var){
    .name = "var",
    .formula = "y = Σ (x - mean)² / (N - correction) over dims",
    .derivative = "dx = g·2·(x - mean) / (N - correction)",
    .shape_rule = "x.shape without dims (size 1 each if keepdim)",
    .call = [](const OpArgs& x) { return var(x[0]); },
    .samples = {var_sample({4, 7}, {}, false, 1, "all"), var_sample({4, 7}, {1}, false, 1, "dims={1}"),
                var_sample({4, 7}, {0}, true, 1, "dims={0} keepdim"),
                var_sample({2, 3, 5}, {0, 2}, false, 0, "dims={0,2} correction=0"),
                var_sample({2, 3, 5}, {-1}, true, 2, "dims={-1} keepdim correction=2")},
    .schema =
        "var(Tensor input, int[1]? dim=None, bool? unbiased=None, bool keepdim=False, *, int? correction=None) -> "
        "Tensor",
    .invoke =
        [](const Arguments& a) {
          LOOM_CHECK(a.is_none("unbiased") || a.is_none("correction"), "var: give unbiased or correction, not both");
          const bool unbiased = a.is_none("unbiased") || a.boolean("unbiased");
          return var(a.tensor("input"), a.integers("dim"), a.boolean("keepdim"),
                     a.optional_integer("correction").value_or(unbiased ? 1 : 0));
        },
};

}  // namespace loom
