// dropout(x, p, train, gen): y_i = keep_i * x_i / (1 - p), keep_i = (u_i >= p)
//   dx = dropout_backward(g, mask, p) = keep * g / (1 - p)
// u_i is uniform in [0, 1), drawn from Philox(seed, offset) at the element's logical
// index i, so the mask is the same for any thread count. The forward also writes the
// keep decisions as a bitmask (bit i % 32 of word i / 32, int32) that the backward
// reads instead of running Philox again: N/8 bytes, and the backward becomes one
// memory-bound pass. The map g -> keep * g / (1 - p) is linear and self-adjoint, so
// dropout_backward's own backward is itself. p == 0 or !train returns x itself.
// CPU kernels: ops/cpu/dropout.cpp.
#include "dropout_support.h"

namespace loom {

using kernels::dropout_mask_words;

Tensor dropout(const Tensor& x, double p, bool train, Generator& gen, Where where) {
  CallSite site(where);
  LOOM_CHECK(p >= 0.0 && p <= 1.0, "dropout: p must be in [0, 1], got {}", p);
  if (!train || p == 0.0) return x;
  detail::check_dropout_input("dropout", x, p);
  uint64_t seed = gen.seed(), offset = gen.next_offset();
  Tensor out = Tensor::empty(x.shape(), {x.dtype(), x.device()});
  Tensor mask = Tensor::empty({dropout_mask_words(x.numel())}, {DType::i32, x.device()});
  detail::kernel_for<kernels::DropoutKernel>("dropout", x)(out, mask, detail::dense(x),
                                                           kernels::DropoutDraw{p, seed, offset});
  return record("dropout", {x}, out, [mask, p](BackwardContext&, const Tensor& g) -> detail::Grads {
    return {dropout_backward(g, mask, p)};
  });
}

Tensor dropout_backward(const Tensor& grad, const Tensor& mask, double p, Where where) {
  CallSite site(where);
  detail::check_dropout_input("dropout_backward", grad, p);
  detail::check_dropout_mask("dropout_backward", mask, grad);
  Tensor md = detail::dense(mask);
  Tensor out = Tensor::empty(grad.shape(), {grad.dtype(), grad.device()});
  detail::kernel_for<kernels::DropoutBackwardKernel>("dropout_backward", grad)(out, detail::dense(grad), md, p);
  return record("dropout_backward", {grad}, out,
                [md, p](BackwardContext&, const Tensor& v) -> detail::Grads { return {dropout_backward(v, md, p)}; });
}

// Composition: dropout is x times the dropped-and-scaled ones tensor (a constant).
LOOM_OP(dropout){
    .name = "dropout",
    .formula = "y = keep·x / (1-p),  keep = [u ≥ p], u uniform in [0, 1) (Philox)",
    .derivative = "dx = keep·g / (1-p)   (the same mask)",
    .shape_rule = "y has x's shape",
    .call = [](const OpArgs& x) { return detail::dropout_fixed(x[0], 0.3); },
    .samples = {{{{{4, 7}}}, [](const OpArgs& x) { return detail::dropout_fixed(x[0], 0.3); }, "[4,7] p=0.3"},
                {{{{2, 3, 5}}}, [](const OpArgs& x) { return detail::dropout_fixed(x[0], 0.3); }, "[2,3,5] p=0.3"},
                {{{{3, 9}}},
                 [](const OpArgs& x) { return detail::dropout_fixed(x[0], 0.7); },
                 "p=0.7",
                 [](const OpArgs& x) { return mul(x[0], detail::dropout_fixed(ones_like(x[0]), 0.7)); }},
                // invoke draws from the default generator: only its deterministic calls are samples
                {.inputs = {{{4, 7}}},
                 .label = "p=0.3 training=False (x itself)",
                 .composed = [](const OpArgs& x) { return x[0]; },
                 .attributes = {{"p", 0.3}, {"training", false}}},
                {.inputs = {{{4, 7}}},
                 .label = "p=0 (x itself)",
                 .composed = [](const OpArgs& x) { return x[0]; },
                 .attributes = {{"p", 0.0}}}},
    .composed = [](const OpArgs& x) { return mul(x[0], detail::dropout_fixed(ones_like(x[0]), 0.3)); },
    .schema = "dropout(Tensor input, float p=0.5, bool training=True, bool inplace=False) -> Tensor",
    .invoke =
        [](const Arguments& a) {
          LOOM_CHECK(!a.boolean("inplace"), "dropout: inplace=True is not supported");
          return dropout(a.tensor("input"), a.number("p"), a.boolean("training"));
        },
};

// Samples: a random bitmask over a partial last word (28 elements) and over two
// full words and a partial one (65 elements).
LOOM_OP(dropout_backward){
    .name = "dropout_backward",
    .formula = "dx = keep·g / (1-p),  keep read from the forward's bitmask",
    .derivative = "d/dg = dropout_backward(v, mask, p)   (linear and self-adjoint)",
    .shape_rule = "g's shape; mask int32 [⌈n/32⌉]",
    .call = [](const OpArgs& x) { return dropout_backward(x[0], x[1], 0.3); },
    .samples = {{{{{4, 7}}, detail::dropout_mask_sample(28)}, {}, "[4,7] p=0.3"},
                {{{{5, 13}}, detail::dropout_mask_sample(65)}, {}, "[5,13] p=0.3"}},
    .composed = [](const OpArgs& x) { return mul(x[0], dropout_backward(ones_like(x[0]), x[1], 0.3)); },
};

}  // namespace loom
