// Benchmark cases of the row ops: softmax and log_softmax (attention weights, the
// output layer), layer_norm, and the label-smoothed loss over the vocabulary.
#include <fmt/format.h>

#include "loom/bench_case.h"
#include "loom/ops.h"

namespace loom {

namespace {
using namespace bench;

// Attention weights under the causal mask (masked_call takes x and the mask), and
// the output layer's rows over the vocabulary.
std::vector<BenchCase> row_op_cases(const std::string& op, OpCall masked_call) {
  const double attention = sentences * heads * tokens * tokens, logits = rows * static_cast<double>(vocab);
  const std::string backward = "bwd 4*3n (read y, G; write dx)";
  return {{.label = op + " 64x8x24x24 causal mask",
           .inputs = {{{sentences, heads, tokens, tokens}}, {.make = [](Generator&) { return causal_mask(tokens); }}},
           .call = std::move(masked_call),
           .forward_work = 2 * attention * f32_bytes + tokens * tokens,
           .backward_work = 3 * attention * f32_bytes,
           .formula = "fwd 4*2n + T*T mask bytes; " + backward},
          {.label = op + " 1536x8000",
           .inputs = {{{rows, vocab}}},
           .forward_work = 2 * logits * f32_bytes,
           .backward_work = 3 * logits * f32_bytes,
           .formula = "fwd 4*2n; " + backward}};
}

// With weight and bias, at d_model 512 and 256.
std::vector<BenchCase> layer_norm_cases() {
  std::vector<BenchCase> cases;
  for (int64_t d : {512, 256}) {
    const double n = rows * static_cast<double>(d);
    cases.push_back({.label = fmt::format("layer_norm {}x{}", rows, d),
                     .inputs = {{{rows, d}}, {{d}}, {{d}}},
                     .forward_work = (2 * n + 2 * d) * f32_bytes,
                     .backward_work = (3 * n + 3 * d) * f32_bytes,
                     .formula = "fwd 4*(2n + 2D) (x, w, b -> y); bwd 4*(3n + 3D) (x, G, w -> dx, dw, db)"});
  }
  return cases;
}

// The loss's targets: ids in [1, V) with every 10th one padding (0, ignored).
Tensor padded_targets(Generator& gen) {
  auto ids = random_ids({rows}, 1, vocab, gen).to_vector<int64_t>();
  for (size_t i = 9; i < ids.size(); i += 10) ids[i] = 0;
  return from_vector(ids, {rows}, {.dtype = DType::i64});
}

}  // namespace

LOOM_BENCH(softmax){.op = "softmax",
                    .cases = row_op_cases("softmax", [](const OpArgs& x) { return softmax(x[0], -1, x[1]); })};

LOOM_BENCH(log_softmax){.op = "log_softmax", .cases = row_op_cases("log_softmax", [](const OpArgs& x) {
                                               return log_softmax(x[0], -1, x[1]);
                                             })};

LOOM_BENCH(layer_norm){.op = "layer_norm", .cases = layer_norm_cases()};

LOOM_BENCH(label_smoothed_cross_entropy){
    .op = "label_smoothed_cross_entropy",
    .cases = {{.label = "cross_entropy 1536x8000 ls=0.1 ignore",
               .inputs = {{{rows, vocab}}, {.make = padded_targets}},
               .call = [](const OpArgs& x) { return label_smoothed_cross_entropy(x[0], x[1], 0.1, 0); },
               .forward_work = rows * vocab * f32_bytes + rows * id_bytes,
               .backward_work = 2 * rows * vocab * f32_bytes + rows * id_bytes,
               .formula = "fwd 4n + 8*rows (logits, targets -> scalar); bwd 4*2n + 8*rows (-> dlogits)"}}};

}  // namespace loom
