// Diagnostics put the path of a mistyped value in nlohmann's messages ("(/d_model) type must be number").
#define JSON_DIAGNOSTICS 1
#include <nlohmann/json.hpp>

#include "loom/error.h"
#include "loom/models/transformer.h"

namespace loom::models {

void TransformerConfig::validate() const {
  // Every field gets a range before anything is built: a checkpoint's config is
  // user input, and "encoder_layers": 100000 or "max_len": 2^62 once reached
  // the allocator (std::bad_alloc) or wrapped a size product.
  auto check_range = [](const char* field, int64_t value, int64_t lo, int64_t hi) {
    LOOM_CHECK(value >= lo && value <= hi, "TransformerConfig: {} must be between {} and {}, got {}", field, lo, hi,
               value);
  };
  check_range("src_vocab", src_vocab, 1, kMaxVocab);
  check_range("tgt_vocab", tgt_vocab, 1, kMaxVocab);
  check_range("d_model", d_model, 1, kMaxWidth);
  check_range("d_ff", d_ff, 1, kMaxWidth);
  check_range("heads", heads, 1, d_model);
  LOOM_CHECK(d_model % heads == 0, "TransformerConfig: d_model {} must be a positive multiple of heads {} (d_ff {})",
             d_model, heads, d_ff);
  check_range("encoder_layers", encoder_layers, 1, kMaxLayers);
  check_range("decoder_layers", decoder_layers, 1, kMaxLayers);
  check_range("max_len", max_len, 1, kMaxLen);
  LOOM_CHECK(dropout >= 0.0 && dropout < 1.0, "TransformerConfig: dropout must be at least 0 and below 1, got {}",
             dropout);
  for (auto [field, p] : {std::pair{"attention_dropout", attention_dropout}, {"relu_dropout", relu_dropout}})
    LOOM_CHECK(p == -1.0 || (p >= 0.0 && p < 1.0),
               "TransformerConfig: {} must be -1 (the dropout's) or at least 0 and below 1, got {}", field, p);
  LOOM_CHECK(layer_norm_eps > 0.0 && layer_norm_eps <= 1.0,
             "TransformerConfig: layer_norm_eps must be above 0 and at most 1, got {}", layer_norm_eps);
  LOOM_CHECK(pad_id >= 0 && pad_id < src_vocab && pad_id < tgt_vocab,
             "TransformerConfig: pad_id {} is out of range for vocabularies of {} and {}", pad_id, src_vocab,
             tgt_vocab);
  LOOM_CHECK(!share_embeddings || src_vocab == tgt_vocab,
             "TransformerConfig: shared embeddings need one vocabulary, got {} and {}", src_vocab, tgt_vocab);
  // Each field in range can still multiply out to more than any machine holds.
  const double elements = approximate_elements();
  LOOM_CHECK(elements <= kMaxElements,
             "TransformerConfig: the model would hold about {:.3g} billion values ({:.0f} GiB in float32), more than "
             "the {:.3g} billion loom builds",
             elements / 1e9, elements * 4 / (1 << 30), kMaxElements / 1e9);
}

double TransformerConfig::approximate_elements() const {
  // In double: no overflow whatever the fields. Attention is 4 projections,
  // feed-forward 2 matrices; biases and norms are O(d) and left out.
  const double d = static_cast<double>(d_model), ff = static_cast<double>(d_ff);
  const double embeddings = d * static_cast<double>(src_vocab + (share_embeddings ? 0 : tgt_vocab));  // output tied
  const double encoder = static_cast<double>(encoder_layers) * (4 * d * d + 2 * d * ff);
  const double decoder = static_cast<double>(decoder_layers) * (8 * d * d + 2 * d * ff);
  return embeddings + encoder + decoder + static_cast<double>(max_len) * d;  // + the positional table
}

// The JSON field names are the member names (nlohmann's macro writes both directions).
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(TransformerConfig, src_vocab, tgt_vocab, d_model, d_ff, heads, encoder_layers,
                                   decoder_layers, dropout, attention_dropout, relu_dropout, learned_positions, max_len,
                                   pad_id, share_embeddings, pre_norm, layer_norm_eps)

std::string TransformerConfig::to_json() const { return nlohmann::json(*this).dump(); }

namespace {
// The integer fields must hold JSON integers: nlohmann converts a float with a
// plain cast, undefined behaviour outside int64's range (6e19 here: found by fuzz_config).
void check_integer_fields(const nlohmann::json& j) {
  if (!j.is_object()) return;  // get_to names that error
  for (const char* field : {"src_vocab", "tgt_vocab", "d_model", "d_ff", "heads", "encoder_layers", "decoder_layers",
                            "max_len", "pad_id"}) {
    auto it = j.find(field);
    if (it != j.end() && it->is_number() && !it->is_number_integer())
      fail("TransformerConfig: {} must be a whole number, got {}", field, it->dump());
  }
}

// Fields added after checkpoints were first written: absent, they mean what the
// model did before them (one dropout everywhere, sinusoids).
void add_later_fields(nlohmann::json& j) {
  if (!j.is_object()) return;
  for (const char* field : {"attention_dropout", "relu_dropout"})
    if (!j.contains(field)) j[field] = -1.0;
  if (!j.contains("learned_positions")) j["learned_positions"] = false;
}
}  // namespace

TransformerConfig TransformerConfig::from_json(const std::string& text) {
  TransformerConfig c;
  try {
    nlohmann::json j = nlohmann::json::parse(text);
    check_integer_fields(j);
    add_later_fields(j);
    j.get_to(c);
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
  fail("presets: unknown preset '{}' ({})", name, fmt::join(kNames, ", "));
}

}  // namespace presets

}  // namespace loom::models
