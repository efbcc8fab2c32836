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

std::string TransformerConfig::to_json() const {
  nlohmann::json j = {{"src_vocab", src_vocab}, {"tgt_vocab", tgt_vocab},
                      {"d_model", d_model},     {"d_ff", d_ff},
                      {"heads", heads},         {"encoder_layers", encoder_layers},
                      {"decoder_layers", decoder_layers}, {"dropout", dropout},
                      {"max_len", max_len},     {"pad_id", pad_id},
                      {"share_embeddings", share_embeddings}, {"pre_norm", pre_norm},
                      {"layer_norm_eps", layer_norm_eps}};
  return j.dump();
}

TransformerConfig TransformerConfig::from_json(const std::string& text) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    fail("TransformerConfig: the configuration is not valid JSON: {}", e.what());
  }
  LOOM_CHECK(j.is_object(), "TransformerConfig: the configuration must be a JSON object");
  TransformerConfig c;
  auto read = [&](const char* key, auto& field) {
    LOOM_CHECK(j.contains(key), "TransformerConfig: the configuration lacks '{}'", key);
    try {
      j.at(key).get_to(field);
    } catch (const nlohmann::json::exception&) {
      fail("TransformerConfig: '{}' has the wrong type: {}", key, j.at(key).dump());
    }
  };
  read("src_vocab", c.src_vocab);
  read("tgt_vocab", c.tgt_vocab);
  read("d_model", c.d_model);
  read("d_ff", c.d_ff);
  read("heads", c.heads);
  read("encoder_layers", c.encoder_layers);
  read("decoder_layers", c.decoder_layers);
  read("dropout", c.dropout);
  read("max_len", c.max_len);
  read("pad_id", c.pad_id);
  read("share_embeddings", c.share_embeddings);
  read("pre_norm", c.pre_norm);
  read("layer_norm_eps", c.layer_norm_eps);
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
