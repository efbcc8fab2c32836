// Benchmark cases of the memory-bound ops on the training path: the residual and
// bias adds, mul, the FFN's activations, dropout, a row sum and the embedding.
#include <fmt/format.h>

#include "loom/bench_case.h"
#include "loom/ops.h"

namespace loom {

namespace {
using namespace bench;

// The residual add, and the bias adds of the Linear layers (backward: da = G, dbias = row sum of G).
std::vector<BenchCase> add_cases() {
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

// An elementwise activation (relu, gelu) on the FFN's hidden layer, n = 1536 x 2048.
BenchCase ffn_activation(const std::string& op) {
  const double n = rows * 2048.0;
  return {.label = op + " 1536x2048",
          .inputs = {{{rows, 2048}}},
          .forward_work = 2 * n * f32_bytes,
          .backward_work = 3 * n * f32_bytes,
          .formula = "fwd 4*2n; bwd 4*3n (read G, x; write dx)"};
}

}  // namespace

LOOM_BENCH(add){.op = "add", .cases = add_cases()};

LOOM_BENCH(mul){.op = "mul",
                .cases = {{.label = "mul 1536x512 * 1536x512",
                           .inputs = {{{rows, 512}}, {{rows, 512}}},
                           .forward_work = 3 * rows * 512.0 * f32_bytes,
                           .backward_work = 5 * rows * 512.0 * f32_bytes,
                           .formula = "fwd 4*3n; bwd 4*5n (read G, a, b; write da, db)"}}};

LOOM_BENCH(relu){.op = "relu", .cases = {ffn_activation("relu")}};

LOOM_BENCH(gelu){.op = "gelu", .cases = {ffn_activation("gelu")}};

// Mask generation included; a new mask per call, as in training.
LOOM_BENCH(dropout){.op = "dropout",
                    .cases = {{.label = "dropout p=0.1 1536x2048",
                               .inputs = {{{rows, 2048}}},
                               .call = [](const OpArgs& x) { return dropout(x[0], 0.1, true, default_generator()); },
                               .forward_work = 2 * rows * 2048.0 * f32_bytes + rows * 2048.0 / 8,
                               .backward_work = 2 * rows * 2048.0 * f32_bytes + rows * 2048.0 / 8,
                               .formula = "fwd 4*2n + n/8; bwd 4*2n + n/8 (loom writes then reads an n/8-byte bitmask; "
                                          "torch moves an n-byte mask)"}}};

LOOM_BENCH(sum){.op = "sum",
                .cases = {{.label = "sum 1536x512 over last dim",
                           .inputs = {{{rows, 512}}},
                           .call = [](const OpArgs& x) { return sum(x[0], {-1}, false); },
                           .forward_work = (rows * 512.0 + rows) * f32_bytes,
                           .backward_work = (rows * 512.0 + rows) * f32_bytes,
                           .formula = "fwd 4*(n + rows); bwd 4*(rows + n) (G expanded to x's shape)"}}};

LOOM_BENCH(embedding){
    .op = "embedding",
    .cases = {{.label = "embedding 8000x512 [64x24 ids]",
               .inputs = {{{sentences, tokens}, DType::i64, vocab}, {{vocab, 512}}},
               .forward_work = rows * (id_bytes + 2 * 512 * f32_bytes),
               .backward_work = rows * (id_bytes + 512 * f32_bytes) + vocab * 512 * f32_bytes,
               .formula = "fwd 8*ids + 4*2*ids*D (ids, rows read -> rows written); bwd 8*ids + 4*ids*D + "
                          "4*V*D (G, ids -> the dense [V, D] table)"}}};

}  // namespace loom
