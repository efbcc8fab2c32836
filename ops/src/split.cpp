// split(x, size, dim): consecutive pieces of `size` along dim (the last one may be
// shorter). chunk(x, chunks, dim): split with size = ceil(x.size(dim) / chunks),
// so possibly fewer than `chunks` pieces (as torch.chunk).
// Composites: each piece is a narrow view, so the gradient is narrow's.
#include <algorithm>

#include "elementwise.h"

namespace loom {

std::vector<Tensor> split(const Tensor& x, int64_t size, int64_t dim, Where where) {
  CallSite site(where);
  LOOM_CHECK(x.dim() >= 1, "split: cannot split a zero-dimensional tensor");
  int64_t d = wrap_dim(dim, x.dim(), "split");
  LOOM_CHECK(size > 0 || (size == 0 && x.shape()[d] == 0), "split: size must be positive, got {} (shape {})", size,
             x.shape());
  std::vector<Tensor> pieces;
  for (int64_t start = 0; start < x.shape()[d]; start += size)
    pieces.push_back(narrow(x, d, start, std::min(size, x.shape()[d] - start)));
  if (pieces.empty()) pieces.push_back(x);  // an empty dim: one empty piece, like PyTorch
  return pieces;
}

std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim, Where where) {
  CallSite site(where);
  LOOM_CHECK(chunks > 0, "chunk: number of chunks must be positive, got {}", chunks);
  LOOM_CHECK(x.dim() >= 1, "chunk: cannot chunk a zero-dimensional tensor");
  int64_t d = wrap_dim(dim, x.dim(), "chunk");
  int64_t size = (x.shape()[d] + chunks - 1) / chunks;
  return split(x, size, d);
}

namespace {
// The pieces back together in reverse order: every piece, every element, moved.
Tensor reversed_cat(std::vector<Tensor> pieces, int64_t dim) {
  std::reverse(pieces.begin(), pieces.end());
  return cat(pieces, dim);
}
}  // namespace

LOOM_OP(split){
    .name = "split",
    .formula = "pieces = consecutive narrows of `size` along dim (the last may be shorter)",
    .derivative = "each piece's gradient written back into its range of dx",
    .shape_rule = "piece k: dim's size → min(size, rest)",
    .call = [](const OpArgs& x) { return split(x[0], 2, 1).at(1); },
    .samples = {unary_sample({3, 7}, Domain::any, "size=2 dim=1, piece 1"),
                {{{{3, 7}}}, [](const OpArgs& x) { return split(x[0], 2, 1).back(); }, "size=2 dim=1, last (short)"},
                {{{{5, 2, 3}}},
                 [](const OpArgs& x) { return reversed_cat(split(x[0], 2, 0), 0); },
                 "size=2 dim=0, pieces reversed"}},
};

LOOM_OP(chunk){
    .name = "chunk",
    .formula = "split(x, ⌈x.size(dim)/chunks⌉, dim)",
    .derivative = "each piece's gradient written back into its range of dx",
    .shape_rule = "at most `chunks` pieces",
    .call = [](const OpArgs& x) { return chunk(x[0], 3, 0).at(2); },
    .samples = {{{{{7, 3}}}, [](const OpArgs& x) { return chunk(x[0], 3, 0).at(2); }, "3 chunks dim=0, piece 2"},
                {{{{2, 6}}},
                 [](const OpArgs& x) { return reversed_cat(chunk(x[0], 4, -1), -1); },
                 "4 chunks of 6 (3 pieces) dim=-1, reversed"},
                {.inputs = {{{7, 3}}}, .label = "3 chunks dim=0", .attributes = {{"chunks", int64_t{3}}}},
                {.inputs = {{{2, 6}}},
                 .label = "4 chunks of 6 dim=-1",
                 .attributes = {{"chunks", int64_t{4}}, {"dim", int64_t{-1}}}}},
    .schema = "chunk(Tensor input, int chunks, int dim=0) -> Tensor[]",
    .invoke = [](const Arguments& a) { return chunk(a.tensor("input"), a.integer("chunks"), a.integer("dim")); },
};

}  // namespace loom
