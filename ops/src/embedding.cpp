// embedding(weight [V, D], ids [...] int64, padding_idx): out[..., :] = weight[id, :]
//   dweight = embedding_backward(g, ids, V, padding_idx): row v gets the sum of g's
//   rows whose id is v; row padding_idx gets nothing (that row is a fixed pad vector).
// embedding_backward is linear in g; its own gradient is the lookup again,
//   dg = embedding(gg, ids) with positions whose id is padding_idx set to 0,
// so double backward works through the pair.
// CPU kernels: ops/cpu/embedding.cpp (the backward deterministic: each vocabulary
// row sums its tokens in their original order, the same bits for any thread count).
#include "indexing.h"

namespace loom {

namespace {
// The ids' values are checked by the kernels (they alone may read them).
void check_padding_idx(std::string_view op, int64_t vocab, int64_t padding_idx) {
  LOOM_CHECK(padding_idx >= -1 && padding_idx < vocab,
             "{}: padding_idx {} is out of range for a vocabulary of {} (-1 means none)", op, padding_idx, vocab);
}
}  // namespace

Tensor embedding(const Tensor& weight, const Tensor& ids, int64_t padding_idx, Where where) {
  CallSite site(where);
  LOOM_CHECK(!(weight.dtype() == DType::i64 && is_floating(ids.dtype())),
             "embedding: the arguments are (weight, ids), got int64 {} then {} {}: swap them "
             "(PyTorch's F.embedding takes (ids, weight); loom's order is nn.Embedding's weight first)",
             weight.shape(), dtype_name(ids.dtype()), ids.shape());
  LOOM_CHECK(weight.dim() == 2, "embedding: weight must be [vocabulary, dim], got shape {}", weight.shape());
  LOOM_CHECK(ids.dtype() == DType::i64, "embedding: ids must be int64, got {}", dtype_name(ids.dtype()));
  LOOM_CHECK(ids.device() == weight.device(), "embedding: weight is on {} and ids on {}", weight.device(),
             ids.device());
  Tensor idx = detail::index_values("embedding", ids, weight);
  const int64_t vocab = weight.shape()[0];
  check_padding_idx("embedding", vocab, padding_idx);
  Shape out_shape = ids.shape();
  out_shape.push_back(weight.shape()[1]);
  Tensor out = Tensor::empty(out_shape, {weight.dtype(), weight.device()});
  detail::kernel_for<kernels::EmbeddingKernel>("embedding", weight)(out, weight, idx);  // checks the ids
  return record("embedding", {weight}, out,
                [idx, vocab, padding_idx](BackwardContext&, const Tensor& g) -> detail::Grads {
                  return {embedding_backward(g, idx, vocab, padding_idx)};
                });
}

Tensor embedding_backward(const Tensor& grad, const Tensor& ids, int64_t vocab_size, int64_t padding_idx, Where where) {
  CallSite site(where);
  detail::check_dtype("embedding_backward", grad, detail::DTypes::numeric);
  LOOM_CHECK(ids.dtype() == DType::i64, "embedding_backward: ids must be int64, got {}", dtype_name(ids.dtype()));
  LOOM_CHECK(grad.dim() == ids.dim() + 1 && Shape(grad.shape().begin(), grad.shape().end() - 1) == ids.shape(),
             "embedding_backward: grad of shape {} must be the ids' shape {} plus one dim", grad.shape(), ids.shape());
  Tensor idx = detail::index_values("embedding_backward", ids, grad);
  check_padding_idx("embedding_backward", vocab_size, padding_idx);
  Tensor out = Tensor::empty({vocab_size, grad.shape().back()}, {grad.dtype(), grad.device()});  // every row written
  {
    NoGradGuard kernel_internals;
    detail::kernel_for<kernels::EmbeddingBackwardKernel>("embedding_backward", grad)(out, contiguous(grad), idx,
                                                                                     padding_idx);
  }
  return record("embedding_backward", {grad}, out,
                [idx, padding_idx](BackwardContext&, const Tensor& gg) -> detail::Grads {
                  Tensor rows = embedding(gg, idx, padding_idx);
                  if (padding_idx < 0) return {rows};
                  // Positions holding the padding id took no part in the forward: their gradient is 0.
                  Tensor keep;
                  {
                    NoGradGuard constant;
                    Tensor pad = full(idx.shape(), static_cast<double>(padding_idx), {DType::i64, idx.device()});
                    keep = to_dtype(unsqueeze(ne(idx, pad), -1), gg.dtype());
                  }
                  return {mul(rows, keep)};
                });
}

namespace {
// A [V, 1] column of ones with 0 at `row`: the padding samples hold that row at zero,
// as a model does: its true gradient is then 0, the same as what the padding rule
// reports (the rule itself is checked against a hand count in tests/test_shape_ops.cpp
// and by embedding_backward's rows).
Tensor padding_row_held(const Tensor& weight, int64_t row) {
  std::vector<double> keep(static_cast<size_t>(weight.shape()[0]), 1.0);
  keep[static_cast<size_t>(row)] = 0;
  return to_dtype(from_vector<double>(keep, {weight.shape()[0], 1}, {DType::f64, weight.device()}), weight.dtype());
}

// torch.nn.functional.embedding's call: ids first; padding_idx None (none) or a row,
// counted from the end when negative; int32 ids too.
Tensor embedding_as_torch(const Arguments& a) {
  const Tensor& ids = a.tensor("input");
  const Tensor& weight = a.tensor("weight");
  LOOM_CHECK(!(is_floating(ids.dtype()) && (weight.dtype() == DType::i64 || weight.dtype() == DType::i32)),
             "embedding(input, weight): input holds the ids and weight the table; got {} ids and an {} table (the "
             "arguments swapped?)",
             dtype_name(ids.dtype()), dtype_name(weight.dtype()));
  LOOM_CHECK(a.is_none("max_norm") && !a.boolean("scale_grad_by_freq") && !a.boolean("sparse"),
             "embedding: max_norm, scale_grad_by_freq and sparse are not supported");
  LOOM_CHECK(weight.dim() == 2, "embedding: weight must be a [V, D] table, got shape {}", weight.shape());
  const int64_t rows = weight.shape()[0];
  int64_t padding = -1;  // loom's op: -1 is none
  if (auto row = a.optional_integer("padding_idx")) {
    LOOM_CHECK(*row >= -rows && *row < rows, "embedding: padding_idx {} is outside [-{}, {})", *row, rows, rows);
    padding = *row < 0 ? *row + rows : *row;
  }
  return embedding(weight, ids.dtype() == DType::i32 ? to_dtype(ids, DType::i64) : ids, padding);
}
}  // namespace

LOOM_OP(embedding){
    .name = "embedding",
    .formula = "y[.., :] = W[ids[..], :]",
    .derivative = "dW[r] = Σ of g's rows whose id is r   (none for padding_idx)",
    .shape_rule = "ids [..] int64, W [V, D] → [.., D]",
    .call = [](const OpArgs& x) { return embedding(x[1], x[0]); },
    .samples = {{{{{2, 3}, Domain::any, DType::i64, 10}, {{10, 4}}}, {}, "V=10 D=4, ids [2,3]"},
                {{{{8}, Domain::any, DType::i64, 3}, {{3, 5}}}, {}, "V=3 D=5, ids [8] (repeats)"},
                {{{{3, 4}, Domain::any, DType::i64, 4}, {{4, 3}}},
                 [](const OpArgs& x) { return embedding(x[1] * padding_row_held(x[1], 1), x[0], 1); },
                 "padding_idx=1, row held at 0"},
                // gradcheck cannot hold a row at 0 through invoke: the ids stay below the padding row
                {.inputs = {{{3, 4}, Domain::any, DType::i64, 3}, {{4, 3}}},
                 .label = "padding_idx=-1 (the last row, no id on it)",
                 .attributes = {{"padding_idx", int64_t{-1}}}}},
    .schema =
        "embedding(Tensor input, Tensor weight, int? padding_idx=None, float? max_norm=None, float norm_type=2, "
        "bool scale_grad_by_freq=False, bool sparse=False) -> Tensor",
    .invoke = [](const Arguments& a) { return embedding_as_torch(a); },
};

LOOM_OP(embedding_backward){
    .name = "embedding_backward",
    .formula = "dW[r] = Σ_{i: ids_i = r} g_i   (row padding_idx stays 0)",
    .derivative = "d/dg = embedding(v, ids), 0 where the id is padding_idx",
    .shape_rule = "g [.., D], ids [..] → [V, D]",
    .call = [](const OpArgs& x) { return embedding_backward(x[0], x[1], 6); },
    .samples = {{{{{2, 3, 4}}, {{2, 3}, Domain::any, DType::i64, 6}}, {}, "V=6 D=4, ids [2,3]"},
                {{{{10, 3}}, {{10}, Domain::any, DType::i64, 4}},
                 [](const OpArgs& x) { return embedding_backward(x[0], x[1], 4, 3); },
                 "V=4 padding_idx=3, repeats"}},
};

}  // namespace loom
