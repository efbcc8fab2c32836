#include "loom/models/transformer.h"

#include <algorithm>
#include <cmath>

#include "loom/ops.h"

namespace loom::models {

namespace {
// A sub-layer with its residual connection: norm(x + dropout(sublayer(x))), the
// paper's post-norm, or x + dropout(sublayer(norm(x))) with pre_norm.
template <typename Sublayer>
Tensor residual(bool pre_norm, nn::LayerNorm& norm, nn::Dropout& dropout, const Tensor& x, Sublayer&& sublayer) {
  if (pre_norm) return add(x, dropout(sublayer(norm(x))));
  return dropout.add_then_norm(x, sublayer(x), norm);
}
}  // namespace

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
  Tensor y = residual(pre_norm_, norm1, dropout, x, [&](const Tensor& h) { return self_attn(h, h, h, src_mask); });
  return residual(pre_norm_, norm2, dropout, y, [&](const Tensor& h) { return feed_forward(h); });
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
  Tensor y = residual(pre_norm_, norm1, dropout, x, [&](const Tensor& h) { return self_attn(h, h, h, tgt_mask); });
  Tensor z =
      residual(pre_norm_, norm2, dropout, y, [&](const Tensor& h) { return cross_attn(h, memory, memory, src_mask); });
  return residual(pre_norm_, norm3, dropout, z, [&](const Tensor& h) { return feed_forward(h); });
}

namespace {
// Appends one position ([N, heads, 1, d_head]) to a cache buffer, doubling its capacity when full.
// It starts small: beam search copies each row's whole buffer, filled or not, at every
// step (DecoderState::select), and most sentences are done within 16 positions.
void append(Tensor& buffer, int64_t length, const Tensor& newest) {
  const int64_t capacity = buffer.defined() ? buffer.shape()[2] : 0;
  if (length == capacity) {
    Shape shape = newest.shape();
    shape[2] = std::max<int64_t>(4, 2 * capacity);
    Tensor grown = Tensor::empty(shape, {newest.dtype(), newest.device()});
    if (length > 0) copy_(grown.narrow(2, 0, length), buffer.narrow(2, 0, length));
    buffer = grown;
  }
  copy_(buffer.narrow(2, length, 1), newest);
}
}  // namespace

Tensor DecoderLayer::step(const Tensor& x, DecoderLayerCache& cache, const Tensor& src_mask) {
  NoGradGuard no_grad;
  // The rows of one source entry (a sentence's beams) query it as one block:
  // [entries, rows / entries, d_model].
  auto attend_source = [&](const Tensor& h) {
    const int64_t rows = h.shape()[0], entries = cache.source.key.shape()[0];
    return cross_attn.attend(h.reshape({entries, rows / entries, h.shape()[2]}), cache.source, src_mask)
        .reshape(h.shape());
  };
  auto attend_self = [&](const Tensor& h) {
    nn::MultiHeadAttention::KeyValue newest = self_attn.project_key_value(h, h);
    append(cache.keys, cache.length, newest.key);
    append(cache.values, cache.length, newest.value);
    ++cache.length;
    // No mask: every cached position is in the past.
    return self_attn.attend(h, {cache.keys.narrow(2, 0, cache.length), cache.values.narrow(2, 0, cache.length)});
  };
  Tensor y = residual(pre_norm_, norm1, dropout, x, attend_self);
  Tensor z = residual(pre_norm_, norm2, dropout, y, attend_source);
  return residual(pre_norm_, norm3, dropout, z, [&](const Tensor& h) { return feed_forward(h); });
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

Tensor Transformer::embed(const nn::Embedding& table, const Tensor& ids, int64_t first) const {
  LOOM_CHECK(ids.dim() == 2 && ids.dtype() == DType::i64,
             "Transformer: token ids must be int64 [batch, time], got {} {}", dtype_name(ids.dtype()), ids.shape());
  Tensor x = positions(table(ids) * std::sqrt(static_cast<double>(config_.d_model)), first);
  return mixed_precision_ && is_training() ? to_dtype(x, DType::bf16) : x;
}

Transformer::Encoded Transformer::encode(const Tensor& src) {
  // A fill, not a copy from the host: a captured step (loom/capture.h) may not copy.
  Tensor pad = full({}, static_cast<double>(config_.pad_id), {DType::i64, src.device()});
  Tensor src_mask = eq(src, pad).reshape({src.shape()[0], 1, 1, src.shape()[1]});
  Tensor x = embed(src_embed, src);
  for (size_t i = 0; i < encoder.size(); ++i) {
    GraphScope scope(fmt::format("encoder.layers.{}", i));  // one cluster per layer in graph pictures
    x = encoder[i]->forward(x, src_mask);
  }
  if (encoder_norm) x = (*encoder_norm)(x);
  return {x, src_mask};
}

Tensor Transformer::decode(const Encoded& encoded, const Tensor& tgt_in) {
  LOOM_CHECK(tgt_in.dim() == 2 && tgt_in.shape()[0] == encoded.memory.shape()[0],
             "Transformer: target ids {} do not match the source batch {}", tgt_in.shape(), encoded.memory.shape());
  Tensor tgt_mask = causal_mask(tgt_in.shape()[1], tgt_in.device());
  Tensor x = embed(tgt_embed, tgt_in);
  for (size_t i = 0; i < decoder.size(); ++i) {
    GraphScope scope(fmt::format("decoder.layers.{}", i));
    x = decoder[i]->forward(x, encoded.memory, encoded.src_mask, tgt_mask);
  }
  if (decoder_norm) x = (*decoder_norm)(x);
  return generator(x);
}

Tensor Transformer::decode_step(DecoderState& state, const Tensor& tokens) {
  LOOM_CHECK(tokens.dim() == 1 && tokens.dtype() == DType::i64 && tokens.shape()[0] == state.rows(),
             "Transformer::decode_step: expected int64 [{}] tokens (one per row), got {} {}", state.rows(),
             dtype_name(tokens.dtype()), tokens.shape());
  NoGradGuard no_grad;
  const int64_t rows = state.rows();
  Tensor x = embed(tgt_embed, tokens.reshape({rows, 1}), state.fed_);
  for (size_t l = 0; l < decoder.size(); ++l) x = decoder[l]->step(x, state.layers_[l], state.source_mask_);
  if (decoder_norm) x = (*decoder_norm)(x);
  ++state.fed_;
  return generator(x).reshape({rows, config_.tgt_vocab});
}

Tensor Transformer::forward(const Tensor& src, const Tensor& tgt_in) { return decode(encode(src), tgt_in); }

}  // namespace loom::models
