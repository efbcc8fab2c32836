#pragma once
// The encoder-decoder Transformer of "Attention Is All You Need" (Vaswani et
// al., 2017): N encoder layers (self-attention, feed-forward) and N decoder
// layers (masked self-attention, attention over the encoder's output,
// feed-forward), each sub-layer wrapped as LayerNorm(x + Dropout(sublayer(x)))
// (the paper's post-norm; `pre_norm` gives x + Dropout(sublayer(LayerNorm(x)))
// with a final LayerNorm, which trains without warm-up). Embeddings are scaled
// by sqrt(d_model) and summed with sinusoidal (or learned) positions; the output
// projection shares the target embedding's weights (section 3.4). Dropout on the
// residual path, on the attention weights and after the feed-forward's ReLU are
// three settings (Table 3 varies them; the presets use one value for all).
#include <array>
#include <memory>
#include <string>
#include <vector>

#include "loom/nn.h"

namespace loom::models {

struct TransformerConfig {
  int64_t src_vocab = 0, tgt_vocab = 0;
  int64_t d_model = 512, d_ff = 2048, heads = 8;
  int64_t encoder_layers = 6, decoder_layers = 6;
  double dropout = 0.1;            // residual: each sub-layer's output, and embeddings + positions
  double attention_dropout = -1;   // on the attention weights, after the softmax (-1: `dropout`)
  double relu_dropout = -1;        // inside the feed-forward, after the ReLU (-1: `dropout`)
  bool learned_positions = false;  // a trained positional table instead of the sinusoids (Table 3, row E)
  int64_t max_len = 1024;          // longest sequence the positional table covers
  int64_t pad_id = 0;              // source positions holding it are masked out
  bool share_embeddings = false;   // one table for source and target (a joint vocabulary)
  bool pre_norm = false;
  double layer_norm_eps = 1e-6;

  /// Bounds validate() enforces: far above the paper's big model (213M
  /// parameters), far below sizes that overflow or exhaust a machine.
  static constexpr int64_t kMaxVocab = 1 << 24, kMaxWidth = 1 << 16, kMaxLayers = 1000, kMaxLen = 1 << 20;
  static constexpr double kMaxElements = 8e9;  // parameters + positional table: 32 GiB in float32

  /// The rates in effect: the field, or `dropout` where it is -1.
  double attention_p() const { return attention_dropout < 0 ? dropout : attention_dropout; }
  double relu_p() const { return relu_dropout < 0 ? dropout : relu_dropout; }

  std::string to_json() const;
  static TransformerConfig from_json(const std::string& text);  // errors name the bad field
  /// Every field in its range, and the whole model below kMaxElements; errors name the field and its value.
  void validate() const;
  double approximate_elements() const;  // parameters and positional table, counted in double (no overflow)
};

// The paper's sizes (Table 3) and two small ones for CPU study.
namespace presets {
TransformerConfig tiny(int64_t vocab);   // d 64, ff 256, 4 heads, 2+2 layers: tests, seconds on a CPU
TransformerConfig small(int64_t vocab);  // d 256, ff 1024, 4 heads, 3+3 layers: Multi30k on 2 cores
TransformerConfig base(int64_t vocab);   // d 512, ff 2048, 8 heads, 6+6 layers, dropout 0.1 (65M with 37k vocab)
TransformerConfig big(int64_t vocab);    // d 1024, ff 4096, 16 heads, 6+6 layers, dropout 0.3
TransformerConfig by_name(const std::string& name, int64_t vocab);
inline constexpr std::array<std::string_view, 4> kNames = {"tiny", "small", "base", "big"};  // by_name's
}  // namespace presets

class EncoderLayer : public nn::Module {
 public:
  EncoderLayer(const TransformerConfig& config, Generator& gen);
  Tensor forward(const Tensor& x, const Tensor& src_mask);

  nn::MultiHeadAttention self_attn;
  nn::PositionwiseFeedForward feed_forward;
  nn::LayerNorm norm1, norm2;
  nn::Dropout dropout;

 private:
  bool pre_norm_;
};

/// What a decoder layer keeps between decoding steps, per row (hypothesis).
struct DecoderLayerCache {
  /// Self-attention keys and values of the tokens fed so far, positions [0, length)
  /// of [N, heads, capacity, d_head] buffers; a step writes one position in place
  /// (capacity doubles when full), so a step costs O(1) copies, not O(length).
  Tensor keys, values;
  int64_t length = 0;
  /// The encoder output's keys and values, projected once: [E, heads, S, d_head], one
  /// entry per N / E consecutive rows (a sentence's beams, which attend to it
  /// together: one copy per sentence, read once per step, not once per beam).
  nn::MultiHeadAttention::KeyValue source;
};

class DecoderLayer : public nn::Module {
 public:
  DecoderLayer(const TransformerConfig& config, Generator& gen);
  Tensor forward(const Tensor& x, const Tensor& memory, const Tensor& src_mask, const Tensor& tgt_mask);
  /// forward for the newest position only: x [N, 1, d_model] attends over the cached
  /// earlier positions (its own keys/values are appended to the cache) and the source.
  /// Inference only (no graph: the cache is written in place).
  Tensor step(const Tensor& x, DecoderLayerCache& cache, const Tensor& src_mask);

  nn::MultiHeadAttention self_attn, cross_attn;
  nn::PositionwiseFeedForward feed_forward;
  nn::LayerNorm norm1, norm2, norm3;
  nn::Dropout dropout;

 private:
  bool pre_norm_;
};

class Transformer : public nn::Module {
 public:
  explicit Transformer(const TransformerConfig& config, Generator& gen = default_generator());

  /// src [B, S], tgt_in [B, T] int64 ids -> logits [B, T, tgt_vocab].
  Tensor forward(const Tensor& src, const Tensor& tgt_in);
  Tensor operator()(const Tensor& src, const Tensor& tgt_in) { return forward(src, tgt_in); }

  /// The two halves, for decoding: encode once, decode step by step.
  struct Encoded {
    Tensor memory;    // [B, S, d_model]
    Tensor src_mask;  // [B, 1, 1, S] bool, true at padding
  };
  Encoded encode(const Tensor& src);
  Tensor decode(const Encoded& encoded, const Tensor& tgt_in);  // -> logits [B, T, tgt_vocab]

  /// Incremental decoding (inference: no graph is built; call in eval mode): the same logits as decode's last
  /// position, computing only the newest position of N rows (hypotheses), each
  /// continuing one sentence of the encoded batch.
  class DecoderState {
   public:
    /// Keep some rows: new row i continues old row rows[i] (beam search reorders
    /// rows and drops finished ones). Sources are re-gathered only when their
    /// sentences change: one per sentence while every sentence's rows are a run of
    /// the same length (beam search's beams), else one per row.
    void select(const std::vector<int64_t>& rows);
    int64_t rows() const { return static_cast<int64_t>(sentence_.size()); }
    int64_t fed() const { return fed_; }  // tokens fed so far, per row

   private:
    friend class Transformer;
    std::vector<DecoderLayerCache> layers_;
    std::vector<nn::MultiHeadAttention::KeyValue> sources_;  // per layer, one row per sentence: projected once
    Tensor src_mask_, source_mask_;                          // [B, 1, 1, S], and [E, 1, 1, S] for the layers' sources
    std::vector<int64_t> sentence_;                          // the sentence of each row
    std::vector<int64_t> source_sentence_;                   // the sentence of each entry of the layers' sources
    int64_t fed_ = 0;
  };
  DecoderState start_decoding(const Encoded& encoded);  // one row per sentence, nothing fed yet
  /// Feeds one token per row (int64 [N]) -> logits of each row's next token [N, tgt_vocab].
  Tensor decode_step(DecoderState& state, const Tensor& tokens);

  const TransformerConfig& config() const { return config_; }
  int64_t d_model() const { return config_.d_model; }

  /// Mixed-precision training (--precision mixed): in training mode the embedded
  /// tokens are cast to bfloat16 and every layer computes in its input's dtype
  /// (nn::as_activation_dtype casts the float32 weights, whose gradients come back
  /// float32): products, dropout, residual sums, layer norms and attention store
  /// bfloat16, their kernels sum and normalize in float32; the logits are bfloat16
  /// and the loss float32. In eval mode (validation, decoding) the model runs in its
  /// parameters' dtype as before.
  void set_mixed_precision(bool on) { mixed_precision_ = on; }
  bool mixed_precision() const { return mixed_precision_; }

  nn::Embedding src_embed;
  nn::Embedding tgt_embed;  // the source table when share_embeddings
  nn::PositionalEncoding positions;
  std::vector<std::unique_ptr<EncoderLayer>> encoder;
  std::vector<std::unique_ptr<DecoderLayer>> decoder;
  std::unique_ptr<nn::LayerNorm> encoder_norm, decoder_norm;  // pre_norm only
  nn::Linear generator;                                       // weight tied to tgt_embed.weight

 private:
  Tensor embed(const nn::Embedding& table, const Tensor& ids, int64_t first = 0) const;  // first: of the positions
  TransformerConfig config_;
  bool mixed_precision_ = false;
};

}  // namespace loom::models
