// Transformer::DecoderState: the caches of incremental decoding, one row per
// hypothesis, and their reordering as beam search keeps, reorders and drops rows.
// The step that reads and appends to them is DecoderLayer::step (transformer.cpp).
#include "loom/models/transformer.h"
#include "loom/ops.h"

namespace loom::models {

Transformer::DecoderState Transformer::start_decoding(const Encoded& encoded) {
  NoGradGuard no_grad;
  DecoderState state;
  const int64_t batch = encoded.memory.shape()[0];
  for (auto& layer : decoder) {
    // Each head's keys and values made contiguous ([B, heads, S, d_head], not a view of
    // [B, S, d_model]) once per batch: a sentence's rows are then one run of memory,
    // which the search re-gathers with whole-row copies at every step that changes the
    // rows' sentences, and a head's keys are read in one run. The products read the
    // same values in the same order: the same bits.
    nn::MultiHeadAttention::KeyValue source = layer->cross_attn.project_key_value(encoded.memory, encoded.memory);
    state.sources_.push_back({source.key.contiguous(), source.value.contiguous()});
    state.layers_.push_back({.source = state.sources_.back()});
  }
  state.src_mask_ = state.source_mask_ = encoded.src_mask;
  for (int64_t b = 0; b < batch; ++b) state.sentence_.push_back(b);
  state.source_sentence_ = state.sentence_;
  return state;
}

namespace {
// The sentence of each entry of the layers' sources: one per run if the rows (their
// sentences, in order) are runs of one sentence each, all of one length (beam
// search's beams), else one per row.
std::vector<int64_t> sentence_entries(const std::vector<int64_t>& sentence) {
  size_t run = 0;
  while (run < sentence.size() && sentence[run] == sentence[0]) ++run;
  bool uniform = run > 1 && sentence.size() % run == 0;
  for (size_t i = 0; uniform && i < sentence.size(); ++i) uniform = sentence[i] == sentence[i / run * run];
  std::vector<int64_t> entries;
  for (size_t i = 0; i < sentence.size(); i += uniform ? run : 1) entries.push_back(sentence[i]);
  return entries;
}
}  // namespace

void Transformer::DecoderState::select(const std::vector<int64_t>& rows) {
  std::vector<int64_t> sentence;
  bool same_rows = rows.size() == sentence_.size();
  for (size_t i = 0; i < rows.size(); ++i) {
    LOOM_CHECK(rows[i] >= 0 && rows[i] < this->rows(), "DecoderState::select: row {} of {} does not exist", rows[i],
               this->rows());
    sentence.push_back(sentence_[static_cast<size_t>(rows[i])]);
    same_rows = same_rows && rows[i] == static_cast<int64_t>(i);
  }
  if (same_rows) return;  // greedy decoding with no sentence finished: nothing moves
  const Device device = src_mask_.device();
  const Tensor row_index = from_vector(rows, {static_cast<int64_t>(rows.size())}, {DType::i64, device});
  std::vector<int64_t> entries = sentence_entries(sentence);
  const bool same_sources = entries == source_sentence_;
  const Tensor entry_index = from_vector(entries, {static_cast<int64_t>(entries.size())}, {DType::i64, device});
  for (size_t l = 0; l < layers_.size(); ++l) {
    DecoderLayerCache& layer = layers_[l];
    if (layer.keys.defined()) {
      layer.keys = index_select(layer.keys, 0, row_index);
      layer.values = index_select(layer.values, 0, row_index);
    }
    if (!same_sources)
      layer.source = {index_select(sources_[l].key, 0, entry_index), index_select(sources_[l].value, 0, entry_index)};
  }
  if (!same_sources) source_mask_ = index_select(src_mask_, 0, entry_index);
  sentence_ = std::move(sentence);
  source_sentence_ = std::move(entries);
}

}  // namespace loom::models
