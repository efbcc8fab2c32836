#pragma once
// The attention weights of a Transformer on one sentence pair, for pictures
// (`loom attention`) and study: every layer's encoder self-attention, decoder
// self-attention (causal) and decoder-encoder (cross) attention, after the
// softmax, per head. Rows are queries and sum to 1; a masked key gets exactly 0.
#include <vector>

#include "loom/models/transformer.h"

namespace loom::models {

struct AttentionMaps {
  // One tensor per layer, float32 [heads, queries, keys] on the CPU.
  std::vector<Tensor> encoder_self;  // [heads, S, S]
  std::vector<Tensor> decoder_self;  // [heads, T, T], zero above the diagonal
  std::vector<Tensor> cross;         // [heads, T, S]
};

// Runs the model (eval mode, no graph) on src ids [S] (eos included) and the
// decoder's input tgt_in [T] (bos first), keeping each attention's weights.
// The model's attention modules are left as they were (weights not kept).
AttentionMaps attention_maps(Transformer& model, const std::vector<int64_t>& src, const std::vector<int64_t>& tgt_in);

}  // namespace loom::models
