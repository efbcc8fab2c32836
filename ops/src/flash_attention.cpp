// flash_attention(q, k, v, mask, p, train, gen) = dropout(softmax(S, mask), p) v,
// S = q kᵀ/√d_k: scaled_dot_product_attention's value, computed FlashAttention-2's way.
//   forward:  per query row, the keys in blocks with an online softmax (running max and
//             sum); keeps out and each row's log-sum-exp L_i, no [.., Tq, Tk] tensor.
//   backward: P_ij = exp(S_ij - L_i) recomputed, Z the dropout factor (0 or 1/(1-p)),
//             D_i = g_i·out_i,  dS = P∘(Z∘(g vᵀ) - D),
//             dq = dS k/√d_k,  dk = dSᵀ q/√d_k,  dv = (P∘Z)ᵀ g.
// Dropout keeps weight (b, i, j) as dropout keeps that element of the [.., Tq, Tk]
// weights (the same Philox draws as the composite's). A backward that is differentiated
// again (create_graph) is written with ops instead: matmul, softmax, softmax_backward and
// dropout's mask redrawn, so double backward works. The mask is a constant here (loom's:
// bool true = may not attend, or added); a float mask that needs its gradient goes to the
// composite (scaled_dot_product_attention decides). CPU kernels: ops/cpu/flash_attention.cpp.
#include <cmath>

#include "attention.h"
#include "rows.h"

namespace loom {

namespace {

// The gradients as ops (differentiable), from the forward's operands and draws.
std::vector<Tensor> gradients_as_ops(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
                                     const kernels::AttentionArgs& args, const Tensor& g) {
  const Tensor scale = scalar_tensor(args.scale, {q.dtype(), q.device()});
  const Tensor weights = softmax(matmul(mul(q, scale), transpose(k, -1, -2)), -1, mask);
  Tensor dropped = weights, keep;
  if (args.dropout_p > 0) {
    Generator at(args.seed);
    at.set_offset(args.offset);
    keep = dropout(ones_like(weights), args.dropout_p, true, at);
    dropped = mul(weights, keep);
  }
  Tensor d_dropped = matmul(g, transpose(v, -1, -2));
  if (keep.defined()) d_dropped = mul(d_dropped, keep);
  const Tensor d_scores = softmax_backward(weights, d_dropped);
  return {sum_to(mul(matmul(d_scores, k), scale), q.shape()),
          sum_to(mul(matmul(transpose(d_scores, -1, -2), q), scale), k.shape()),
          sum_to(matmul(transpose(dropped, -1, -2), g), v.shape())};
}

}  // namespace

Tensor flash_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask, double dropout_p,
                       bool train, Generator& gen, Where where) {
  CallSite site(where);
  LOOM_CHECK(q.dim() >= 2 && k.dim() >= 2 && v.dim() >= 2,
             "flash_attention: q, k, v need at least 2 dims, got shapes {}, {}, {}", q.shape(), k.shape(), v.shape());
  detail::check_dtype("flash_attention", q, detail::DTypes::floating);
  detail::check_same_kind("flash_attention", q, k);
  detail::check_same_kind("flash_attention", q, v);
  const int64_t queries = q.shape()[q.dim() - 2], depth = q.shape().back();
  const int64_t keys = k.shape()[k.dim() - 2], value_depth = v.shape().back();
  LOOM_CHECK(k.shape().back() == depth,
             "flash_attention: q has {} features per position but k has {} (shapes {} and {})", depth, k.shape().back(),
             q.shape(), k.shape());
  LOOM_CHECK(v.shape()[v.dim() - 2] == keys, "flash_attention: k has {} positions but v has {} (shapes {} and {})",
             keys, v.shape()[v.dim() - 2], k.shape(), v.shape());
  LOOM_CHECK(dropout_p >= 0.0 && dropout_p <= 1.0, "flash_attention: dropout p must be in [0, 1], got {}", dropout_p);
  // The batch dims broadcast, as matmul's; each operand dense with them flattened.
  auto batch_of = [](const Tensor& t) { return Shape(t.shape().begin(), t.shape().end() - 2); };
  Shape batch = kernels::broadcast_shapes(kernels::broadcast_shapes(batch_of(q), batch_of(k), "flash_attention"),
                                          batch_of(v), "flash_attention");
  int64_t batches = 1;
  for (int64_t b : batch) batches *= b;
  auto dense3 = [&](const Tensor& t, int64_t rows, int64_t cols) {
    Shape full = batch;
    full.insert(full.end(), {rows, cols});
    return reshape(contiguous(expand(t, full)), {batches, rows, cols});
  };
  const Tensor q3 = dense3(q, queries, depth), k3 = dense3(k, keys, depth), v3 = dense3(v, keys, value_depth);
  Tensor mask_view;
  if (mask.defined()) {
    LOOM_CHECK(mask.dtype() == DType::b8 || mask.dtype() == q.dtype(),
               "flash_attention: the mask must be bool (true = masked) or additive of q's dtype {}, got {}",
               dtype_name(q.dtype()), dtype_name(mask.dtype()));
    LOOM_CHECK(mask.device() == q.device(), "flash_attention: the mask is on {} but q on {}", mask.device(),
               q.device());
    Shape weights = batch;
    weights.insert(weights.end(), {queries, keys});
    LOOM_CHECK(mask.dim() <= static_cast<int64_t>(weights.size()) &&
                   kernels::broadcast_shapes(weights, mask.shape(), "flash_attention") == weights,
               "flash_attention: a mask of shape {} does not broadcast to the weights' shape {}", mask.shape(),
               weights);
    mask_view = expand(mask.detach(), weights);  // a view: nothing of [.., Tq, Tk] is written
  }
  kernels::AttentionArgs args{.scale = 1.0 / std::sqrt(static_cast<double>(depth)),
                              .dropout_p = train ? dropout_p : 0.0};
  if (args.dropout_p > 0) args.seed = gen.seed(), args.offset = gen.next_offset();
  Tensor out3 = Tensor::empty({batches, queries, value_depth}, {q.dtype(), q.device()});
  // Each row's log-sum-exp, float32 for bfloat16 operands (their kernels' arithmetic).
  Tensor lse = Tensor::empty({batches, queries}, {q.dtype() == DType::bf16 ? DType::f32 : q.dtype(), q.device()});
  {
    NoGradGuard kernel_internals;
    detail::kernel_for<kernels::AttentionKernel>("flash_attention", q)(out3, lse, q3, k3, v3, mask_view, args);
  }
  Shape out_shape = batch;
  out_shape.insert(out_shape.end(), {queries, value_depth});
  return record(
      "flash_attention", {q, k, v}, reshape(out3, out_shape),
      [q, k, v, q3, k3, v3, mask_view, out3, lse, args, batch](BackwardContext&, const Tensor& g) -> detail::Grads {
        if (grad_enabled()) return gradients_as_ops(q, k, v, mask_view, args, g);  // create_graph
        Tensor dq = Tensor::empty(q3.shape(), {q.dtype(), q.device()});
        Tensor dk = Tensor::empty(k3.shape(), {q.dtype(), q.device()});
        Tensor dv = Tensor::empty(v3.shape(), {q.dtype(), q.device()});
        detail::kernel_for<kernels::AttentionBackwardKernel>("flash_attention_backward", q3)(
            dq, dk, dv, reshape(contiguous(g), out3.shape()), q3, k3, v3, mask_view, out3, lse, args);
        auto to_input = [&](const Tensor& d, const Tensor& input) {  // the broadcast batch summed back
          Shape full = batch;
          full.insert(full.end(), d.shape().end() - 2, d.shape().end());
          return sum_to(reshape(d, full), input.shape());
        };
        return {to_input(dq, q), to_input(dk, k), to_input(dv, v)};
      });
}

namespace {
// The samples' calls: dropout from a fixed generator (the same draws for the composite).
Tensor fused(const OpArgs& x, const Tensor& mask, double p = 0) {
  Generator gen(99);
  return flash_attention(x[0], x[1], x[2], mask, p, p > 0, gen);
}
Tensor composite(const OpArgs& x, const Tensor& mask, double p = 0) {
  Generator gen(99);
  return detail::attention_composite(x[0], x[1], x[2], mask, p, p > 0, gen, nullptr);
}
// Sample masks (true = masked) on x's device: key 3 of batch 1 hidden ([2, 1, 1, 5]:
// padding), and row 1 of [3, 5] hidden entirely (its output and gradients are 0).
Tensor padding(const OpArgs& x) {
  return from_vector<double>({0, 0, 0, 0, 0, 0, 0, 0, 1, 1}, {2, 1, 1, 5}, {DType::f64, x[0].device()}).to(DType::b8);
}
Tensor row_hidden(const OpArgs& x) {
  std::vector<double> hidden(15, 0.0);
  for (int j = 0; j < 5; ++j) hidden[5 + j] = 1;
  hidden[2] = 1;
  return from_vector<double>(hidden, {3, 5}, {DType::f64, x[0].device()}).to(DType::b8);
}
OpCall with(Tensor (*mask)(const OpArgs&), Tensor (*how)(const OpArgs&, const Tensor&, double), double p = 0) {
  return [=](const OpArgs& x) { return how(x, mask ? mask(x) : Tensor(), p); };
}
Tensor causal(const OpArgs& x) { return causal_mask(x[0].shape()[x[0].dim() - 2], x[0].device()); }
}  // namespace

LOOM_OP(flash_attention){
    .name = "flash_attention",
    .formula = "y = dropout(softmax(q·kᵀ/√d_k, mask))·v, key blocks with an online softmax",
    .derivative =
        "P = exp(S - L) recomputed;  dS = P⊙(Z⊙(g·vᵀ) - rowsum(g⊙y));  dq = dS·k/√d_k;  dk = dSᵀ·q/√d_k;  "
        "dv = (P⊙Z)ᵀ·g",
    .shape_rule = "q [.., Tq, d_k], k [.., Tk, d_k], v [.., Tk, d_v] → [.., Tq, d_v] (batch dims broadcast)",
    .call = [](const OpArgs& x) { return fused(x, {}); },
    .samples =
        {{{{{1, 2, 3, 3}}, {{1, 2, 4, 3}}, {{1, 2, 4, 2}}}, {}, "no mask", with(nullptr, composite)},
         {{{{2, 4, 3}}, {{2, 4, 3}}, {{2, 4, 2}}}, with(causal, fused), "causal", with(causal, composite)},
         {{{{2, 2, 3, 4}}, {{2, 2, 5, 4}}, {{2, 2, 5, 3}}},
          with(padding, fused),
          "padding mask [2,1,1,5]",
          with(padding, composite)},
         {{{{3, 4}}, {{5, 4}}, {{5, 2}}}, with(row_hidden, fused), "a row all masked", with(row_hidden, composite)},
         {{{{2, 3, 4}}, {{2, 5, 4}}, {{2, 5, 2}}, {{3, 5}, Domain::any, DType::f64, 0, false}},
          [](const OpArgs& x) { return fused(x, x[3]); },
          "additive mask [3,5]",
          [](const OpArgs& x) { return composite(x, x[3]); }},
         {{{{2, 3, 3}}, {{2, 4, 3}}, {{2, 4, 2}}},
          with(nullptr, fused, 0.25),
          "dropout p=0.25",
          with(nullptr, composite, 0.25)},
         {{{{1, 3, 4}}, {{1, 70, 4}}, {{1, 70, 2}}},
          with(nullptr, fused),
          "70 keys (two blocks)",
          with(nullptr, composite)},
         {{{{2, 3, 4}}, {{5, 4}}, {{5, 2}}},
          with(nullptr, fused),
          "k, v broadcast over q's batch",
          with(nullptr, composite)}},
    .composed = [](const OpArgs& x) { return composite(x, {}); },
};

}  // namespace loom
