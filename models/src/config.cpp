// Diagnostics put the path of a mistyped value in nlohmann's messages ("(/d_model) type must be number").
#define JSON_DIAGNOSTICS 1
#include <nlohmann/json.hpp>

#include "loom/error.h"
#include "loom/models/transformer.h"

namespace loom::models {

void TransformerConfig::validate() const {
  LOOM_CHECK(src_vocab > 0 && tgt_vocab > 0, "TransformerConfig: vocabulary sizes must be positive, got {} and {}",
             src_vocab, tgt_vocab);
  LOOM_CHECK(d_model > 0 && d_ff > 0 && heads > 0 && d_model % heads == 0,
             "TransformerConfig: d_model {} must be a positive multiple of heads {} (d_ff {})", d_model, heads, d_ff);
  LOOM_CHECK(encoder_layers >= 1 && decoder_layers >= 1, "TransformerConfig: layers must be >= 1, got {} and {}",
             encoder_layers, decoder_layers);
  LOOM_CHECK(dropout >= 0.0 && dropout < 1.0, "TransformerConfig: dropout must be in [0, 1), got {}", dropout);
  LOOM_CHECK(pad_id >= 0 && pad_id < src_vocab && pad_id < tgt_vocab,
             "TransformerConfig: pad_id {} is out of range for vocabularies of {} and {}", pad_id, src_vocab,
             tgt_vocab);
  LOOM_CHECK(!share_embeddings || src_vocab == tgt_vocab,
             "TransformerConfig: shared embeddings need one vocabulary, got {} and {}", src_vocab, tgt_vocab);
  LOOM_CHECK(max_len > 0, "TransformerConfig: max_len must be positive, got {}", max_len);
}

// The JSON field names are the member names (nlohmann's macro writes both directions).
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(TransformerConfig, src_vocab, tgt_vocab, d_model, d_ff, heads, encoder_layers,
                                   decoder_layers, dropout, max_len, pad_id, share_embeddings, pre_norm,
                                   layer_norm_eps)

std::string TransformerConfig::to_json() const { return nlohmann::json(*this).dump(); }

TransformerConfig TransformerConfig::from_json(const std::string& text) {
  TransformerConfig c;
  try {
    nlohmann::json::parse(text).get_to(c);
  } catch (const nlohmann::json::exception& e) {  // names the missing or mistyped field
    fail("TransformerConfig: cannot read the configuration: {}", e.what());
  }
  c.validate();
  return c;
}

namespace presets {

namespace {
TransformerConfig sized(int64_t vocab, int64_t d_model, int64_t d_ff, int64_t heads, int64_t layers, double dropout) {
  TransformerConfig c;
  c.src_vocab = c.tgt_vocab = vocab;
  c.share_embeddings = true;
  c.d_model = d_model;
  c.d_ff = d_ff;
  c.heads = heads;
  c.encoder_layers = c.decoder_layers = layers;
  c.dropout = dropout;
  return c;
}
}  // namespace

TransformerConfig tiny(int64_t vocab) { return sized(vocab, 64, 256, 4, 2, 0.1); }
TransformerConfig small(int64_t vocab) { return sized(vocab, 256, 1024, 4, 3, 0.1); }
TransformerConfig base(int64_t vocab) { return sized(vocab, 512, 2048, 8, 6, 0.1); }
TransformerConfig big(int64_t vocab) { return sized(vocab, 1024, 4096, 16, 6, 0.3); }

TransformerConfig by_name(const std::string& name, int64_t vocab) {
  if (name == "tiny") return tiny(vocab);
  if (name == "small") return small(vocab);
  if (name == "base") return base(vocab);
  if (name == "big") return big(vocab);
  fail("presets: unknown preset '{}' (tiny, small, base, big)", name);
}

}  // namespace presets

}  // namespace loom::models
