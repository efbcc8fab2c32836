// `loom study masks`: what the padding and causal masks look like and what
// they do. A batch of three source sentences of 6, 3 and 4 tokens padded to 6
// gives the padding mask [3, 1, 1, 6] (as Transformer::encode builds it: true
// where the source holds the pad id), seen by every query of a sentence; the
// decoder's causal mask [6, 6] hides later positions. Then the attention
// weights scaled_dot_product_attention gives through each mask, on random q, k, v:
// masked keys get exactly 0 and every row still sums to 1 (the table checks both).
#include <cmath>

#include "heatmap.h"
#include "loom/ops.h"
#include "study.h"

namespace loom::tools {

namespace {

HeatMap as_map(const std::string& title, const Tensor& t) {  // t: 2-d
  HeatMap m{title, t.shape()[0], t.shape()[1], to_dtype(t, DType::f64).to_vector<double>(), {}, {}};
  return m;
}

}  // namespace

void study_masks(const StudyOptions& o) {
  constexpr int64_t kLen = 6, kPad = 0, kDk = 8;
  const std::vector<int64_t> lengths = {6, 3, 4};
  std::vector<int64_t> ids;
  for (int64_t len : lengths)
    for (int64_t t = 0; t < kLen; ++t) ids.push_back(t < len ? 5 + t : kPad);
  const auto batch = static_cast<int64_t>(lengths.size());
  Tensor src = from_vector(ids, {batch, kLen}, {DType::i64});
  Tensor padding = eq(src, from_vector<int64_t>({kPad}, {}, {DType::i64})).reshape({batch, 1, 1, kLen});
  Tensor causal = causal_mask(kLen);

  Generator gen(o.seed);
  Tensor q = randn({batch, 1, kLen, kDk}, {DType::f64}, gen), k = randn({batch, 1, kLen, kDk}, {DType::f64}, gen),
         v = randn({batch, 1, kLen, kDk}, {DType::f64}, gen);
  Tensor padded_weights, causal_weights;
  scaled_dot_product_attention(q, k, v, padding, 0.0, false, gen, &padded_weights);
  scaled_dot_product_attention(q, k, v, causal, 0.0, false, gen, &causal_weights);

  std::vector<HeatMap> maps;
  Table table{{"sentence", "length", "mask", "masked_entries", "max_weight_on_masked", "min_row_sum", "max_row_sum"},
              {}};
  auto check = [&](int64_t s, double mask_id, const Tensor& mask2d, const Tensor& weights2d) {
    const std::vector<double> mask = to_dtype(mask2d, DType::f64).to_vector<double>();
    const std::vector<double> w = weights2d.to_vector<double>();
    double masked = 0, worst = 0, low = INFINITY, high = -INFINITY;
    for (int64_t r = 0; r < kLen; ++r) {
      double row = 0;
      for (int64_t c = 0; c < kLen; ++c) {
        const size_t i = static_cast<size_t>(r * kLen + c);
        row += w[i];
        if (mask[i] != 0) masked += 1, worst = std::max(worst, std::abs(w[i]));
      }
      low = std::min(low, row), high = std::max(high, row);
    }
    table.rows.push_back({static_cast<double>(s + 1), static_cast<double>(lengths[static_cast<size_t>(s)]), mask_id,
                          masked, worst, low, high});
  };
  for (int64_t s = 0; s < batch; ++s) {
    // The padding mask as the attention sees it: every query row of sentence s, keys past its length masked.
    Tensor mask2d = to_dtype(padding.select(0, s).reshape({1, kLen}), DType::f64) * ones({kLen, 1}, {DType::f64});
    maps.push_back(as_map(fmt::format("padding mask, sentence {} ({} tokens)", s + 1, lengths[s]), mask2d));
    check(s, 0, mask2d, padded_weights.select(0, s).select(0, 0));
  }
  maps.push_back(as_map("causal mask (decoder)", causal));
  check(0, 1, causal, causal_weights.select(0, 0).select(0, 0));
  maps.push_back(as_map("weights with padding, sentence 2", padded_weights.select(0, 1).select(0, 0)));
  maps.push_back(as_map("weights with the causal mask", causal_weights.select(0, 0).select(0, 0)));
  write_table(o, "masks", table);
  fmt::print("mask: 0 = padding mask, 1 = causal mask; masked entries are 1 (dark) in the mask pictures\n");
  for (const char* ext : {".png", ".svg"})
    draw_heatmaps(o.out + "/masks" + ext, maps, 3,
                  {.title = "Masks (1 = masked) and the attention weights through them",
                   .x_label = "key",
                   .y_label = "query",
                   .panel_pixels = 330});
  fmt::print("plot: {}/masks.png, .svg\n", o.out);
}

}  // namespace loom::tools
