// greedy_bleu (loom/models/decode.h): the validation BLEU of a model in training.
#include <omp.h>

#include <algorithm>
#include <numeric>

#include "loom/models/bleu.h"
#include "loom/models/decode.h"
#include "loom/ops.h"

namespace loom::models {

double greedy_bleu(Transformer& model, const Vocabulary& vocab, const std::vector<std::vector<int64_t>>& sources,
                   const std::vector<std::string>& references, int64_t extra_len) {
  LOOM_CHECK(sources.size() == references.size(), "greedy_bleu: {} sources but {} references", sources.size(),
             references.size());
  constexpr size_t kBatch = 64;
  const Device device = model.parameters().front().device();
  // Shortest first, so each batch pads little; hypotheses go back to their lines.
  std::vector<size_t> order(sources.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return sources[a].size() < sources[b].size(); });
  std::vector<std::vector<int64_t>> outputs(sources.size());  // each line's ids, pieces after the workers
  auto decode_batch = [&](size_t batch) {
    const size_t first = batch * kBatch, last = std::min(order.size(), first + kBatch);
    const size_t longest = sources[order[last - 1]].size() + 1;  // + eos
    std::vector<int64_t> flat;
    for (size_t i = first; i < last; ++i) {
      std::vector<int64_t> ids = sources[order[i]];
      ids.push_back(Vocabulary::kEos);
      ids.resize(longest, Vocabulary::kPad);
      flat.insert(flat.end(), ids.begin(), ids.end());
    }
    const auto rows = static_cast<int64_t>(last - first), cols = static_cast<int64_t>(longest);
    const int64_t max_len = std::min<int64_t>(cols + extra_len, model.config().max_len - 1);
    Tensor out = greedy_decode(model, from_vector(flat, {rows, cols}, {DType::i64}).to(device), Vocabulary::kBos,
                               Vocabulary::kEos, max_len);
    const std::vector<int64_t> ids = out.to(kCPU).to_vector<int64_t>();
    const int64_t width = out.shape()[1];
    for (int64_t r = 0; r < rows; ++r)
      outputs[order[first + static_cast<size_t>(r)]].assign(ids.begin() + r * width, ids.begin() + (r + 1) * width);
  };
  decode_batches(model, (order.size() + kBatch - 1) / kBatch, omp_get_max_threads(), decode_batch);
  std::vector<std::string> hypotheses;
  for (const std::vector<int64_t>& ids : outputs) hypotheses.push_back(vocab.decode(ids));
  return corpus_bleu(hypotheses, {references}).score;
}

}  // namespace loom::models
