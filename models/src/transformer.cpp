#include "loom/models/transformer.h"

#include <cmath>

#include "loom/ops.h"

namespace loom::models {

// ---- encoder layer ----
EncoderLayer::EncoderLayer(const TransformerConfig& c, Generator& gen)
    : self_attn(c.d_model, c.heads, c.attention_p(), gen),
      feed_forward(c.d_model, c.d_ff, c.relu_p(), gen),
      norm1(c.d_model, c.layer_norm_eps),
      norm2(c.d_model, c.layer_norm_eps),
      dropout(c.dropout, gen),
      pre_norm_(c.pre_norm) {
  register_module("self_attn", self_attn);
  register_module("feed_forward", feed_forward);
  register_module("norm1", norm1);
  register_module("norm2", norm2);
  register_module("dropout", dropout);
}

Tensor EncoderLayer::forward(const Tensor& x, const Tensor& src_mask) {
  if (pre_norm_) {
    Tensor h = norm1(x);
    Tensor y = add(x, dropout(self_attn(h, h, h, src_mask)));
    return add(y, dropout(feed_forward(norm2(y))));
  }
  Tensor y = norm1(add(x, dropout(self_attn(x, x, x, src_mask))));
  return norm2(add(y, dropout(feed_forward(y))));
}

// ---- decoder layer ----
DecoderLayer::DecoderLayer(const TransformerConfig& c, Generator& gen)
    : self_attn(c.d_model, c.heads, c.attention_p(), gen),
      cross_attn(c.d_model, c.heads, c.attention_p(), gen),
      feed_forward(c.d_model, c.d_ff, c.relu_p(), gen),
      norm1(c.d_model, c.layer_norm_eps),
      norm2(c.d_model, c.layer_norm_eps),
      norm3(c.d_model, c.layer_norm_eps),
      dropout(c.dropout, gen),
      pre_norm_(c.pre_norm) {
  register_module("self_attn", self_attn);
  register_module("cross_attn", cross_attn);
  register_module("feed_forward", feed_forward);
  register_module("norm1", norm1);
  register_module("norm2", norm2);
  register_module("norm3", norm3);
  register_module("dropout", dropout);
}

Tensor DecoderLayer::forward(const Tensor& x, const Tensor& memory, const Tensor& src_mask, const Tensor& tgt_mask) {
  if (pre_norm_) {
    Tensor h = norm1(x);
    Tensor y = add(x, dropout(self_attn(h, h, h, tgt_mask)));
    Tensor z = add(y, dropout(cross_attn(norm2(y), memory, memory, src_mask)));
    return add(z, dropout(feed_forward(norm3(z))));
  }
  Tensor y = norm1(add(x, dropout(self_attn(x, x, x, tgt_mask))));
  Tensor z = norm2(add(y, dropout(cross_attn(y, memory, memory, src_mask))));
  return norm3(add(z, dropout(feed_forward(z))));
}

// ---- the whole model ----
Transformer::Transformer(const TransformerConfig& config, Generator& gen)
    : src_embed((config.validate(), config.src_vocab), config.d_model, config.pad_id, gen),
      tgt_embed(config.tgt_vocab, config.d_model, config.pad_id, gen),
      positions(config.d_model, config.dropout, config.max_len, gen, {}, config.learned_positions),
      generator(config.d_model, config.tgt_vocab, /*bias=*/false, gen),
      config_(config) {
  register_module("src_embed", src_embed);
  if (config.share_embeddings) tgt_embed.weight = src_embed.weight;
  register_module("tgt_embed", tgt_embed);
  register_module("positions", positions);
  for (int64_t i = 0; i < config.encoder_layers; ++i) {
    encoder.push_back(std::make_unique<EncoderLayer>(config, gen));
    register_module("encoder.layers." + std::to_string(i), *encoder.back());
  }
  for (int64_t i = 0; i < config.decoder_layers; ++i) {
    decoder.push_back(std::make_unique<DecoderLayer>(config, gen));
    register_module("decoder.layers." + std::to_string(i), *decoder.back());
  }
  if (config.pre_norm) {
    encoder_norm = std::make_unique<nn::LayerNorm>(config.d_model, config.layer_norm_eps);
    decoder_norm = std::make_unique<nn::LayerNorm>(config.d_model, config.layer_norm_eps);
    register_module("encoder.norm", *encoder_norm);
    register_module("decoder.norm", *decoder_norm);
  }
  generator.weight = tgt_embed.weight;  // tied: listed once, as tgt_embed.weight (or src_embed.weight)
  register_module("generator", generator);
}

Tensor Transformer::embed(const nn::Embedding& table, const Tensor& ids) const {
  LOOM_CHECK(ids.dim() == 2 && ids.dtype() == DType::i64, "Transformer: token ids must be int64 [batch, time], got {} {}",
             dtype_name(ids.dtype()), ids.shape());
  return positions(table(ids) * std::sqrt(static_cast<double>(config_.d_model)));
}

Transformer::Encoded Transformer::encode(const Tensor& src) {
  Tensor pad = from_vector<int64_t>({config_.pad_id}, {}, {DType::i64, src.device()});
  Tensor src_mask = eq(src, pad).reshape({src.shape()[0], 1, 1, src.shape()[1]});
  Tensor x = embed(src_embed, src);
  for (auto& layer : encoder) x = layer->forward(x, src_mask);
  if (encoder_norm) x = (*encoder_norm)(x);
  return {x, src_mask};
}

Tensor Transformer::decode(const Encoded& encoded, const Tensor& tgt_in) {
  LOOM_CHECK(tgt_in.dim() == 2 && tgt_in.shape()[0] == encoded.memory.shape()[0],
             "Transformer: target ids {} do not match the source batch {}", tgt_in.shape(), encoded.memory.shape());
  Tensor tgt_mask = causal_mask(tgt_in.shape()[1], tgt_in.device());
  Tensor x = embed(tgt_embed, tgt_in);
  for (auto& layer : decoder) x = layer->forward(x, encoded.memory, encoded.src_mask, tgt_mask);
  if (decoder_norm) x = (*decoder_norm)(x);
  return generator(x);
}

Tensor Transformer::forward(const Tensor& src, const Tensor& tgt_in) { return decode(encode(src), tgt_in); }

}  // namespace loom::models
