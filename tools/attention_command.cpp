// `loom attention --model DIR --input "a sentence" --out PREFIX`: heat maps of a
// trained model's attention on one sentence and its greedy translation, like
// the paper's Figures 3-5: PREFIX-encoder, PREFIX-decoder (causal) and
// PREFIX-cross, each .png and .svg, every head of --layer N (or of all layers,
// one row per layer), the subword pieces on the axes; and PREFIX-weights.json
// with the numbers drawn.
#include <fstream>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "heatmap.h"
#include "loom/atomic_file.h"
#include "loom/ops.h"
#include "model_folder.h"
#include "options.h"

namespace loom::tools {

namespace {

struct AttentionOptions {
  std::string model, input, out = "attention";
  int64_t layer = 0;  // 1-based; 0: all
  int64_t extra_len = 50;
  int threads = 2;
};

// "▁Hund" -> "Hund", "▁" marks a word's start; the piece's own text is kept otherwise.
std::vector<std::string> labels(const models::Vocabulary& vocab, const std::vector<int64_t>& ids) {
  std::vector<std::string> out;
  for (int64_t id : ids) {
    std::string piece = id == models::Vocabulary::kBos   ? "<s>"
                        : id == models::Vocabulary::kEos ? "</s>"
                                                         : vocab.piece(id);
    if (piece.rfind("\xE2\x96\x81", 0) == 0 && piece.size() > 3) piece = piece.substr(3);
    out.push_back(piece);
  }
  return out;
}

void run_attention(const AttentionOptions& o) {
  use_threads(o.threads);
  try {  // checked before any picture is drawn: the weights' JSON holds the input text
    (void)nlohmann::json(o.input).dump();
  } catch (const nlohmann::json::type_error&) {
    fail("attention: --input is not valid UTF-8 text");
  }
  ModelFolder folder = load_model_folder(o.model, "attention");
  models::Transformer& model = *folder.model;
  const int64_t layers = model.config().encoder_layers;
  LOOM_CHECK(o.layer <= layers && o.layer <= model.config().decoder_layers,
             "attention: --layer {} but the model has {} encoder and {} decoder layers", o.layer, layers,
             model.config().decoder_layers);
  std::vector<int64_t> src = folder.vocab->encode(o.input);
  LOOM_CHECK(!src.empty(), "attention: --input '{}' has no pieces to attend over", o.input);
  const size_t max_pieces = static_cast<size_t>(model.config().max_len - 1);
  LOOM_CHECK(src.size() <= std::min<size_t>(max_pieces, 200),
             "attention: --input has {} pieces; at most {} fit a "
             "readable picture and the model",
             src.size(), std::min<size_t>(max_pieces, 200));
  src.push_back(models::Vocabulary::kEos);

  // The greedy translation; the decoder's input is bos and every output piece before eos.
  const int64_t max_len = std::min<int64_t>(static_cast<int64_t>(src.size()) + o.extra_len, model.config().max_len - 1);
  Tensor decoded = models::greedy_decode(model, from_vector(src, {1, static_cast<int64_t>(src.size())}, {DType::i64}),
                                         models::Vocabulary::kBos, models::Vocabulary::kEos, max_len);
  std::vector<int64_t> tgt_in;
  for (int64_t id : decoded.to(kCPU).to_vector<int64_t>()) {
    if (id == models::Vocabulary::kEos || id == models::Vocabulary::kPad) break;
    tgt_in.push_back(id);
  }
  const std::string translation = folder.vocab->decode(tgt_in);
  fmt::print("input:       {}\ntranslation: {}\n", o.input, translation);

  const models::AttentionMaps maps = models::attention_maps(model, src, tgt_in);
  const std::vector<std::string> src_labels = labels(*folder.vocab, src), tgt_labels = labels(*folder.vocab, tgt_in);
  nlohmann::json json = {
      {"input", o.input}, {"translation", translation}, {"source_pieces", src_labels}, {"target_pieces", tgt_labels}};
  struct Kind {
    const char* name;
    const char* title;
    const std::vector<Tensor>& weights;
    const std::vector<std::string>&rows, &cols;
  };
  const Kind kinds[] = {
      {"encoder", "encoder self-attention", maps.encoder_self, src_labels, src_labels},
      {"decoder", "decoder self-attention (causal)", maps.decoder_self, tgt_labels, tgt_labels},
      {"cross", "decoder-encoder attention", maps.cross, tgt_labels, src_labels},
  };
  for (const Kind& kind : kinds) {
    std::vector<HeatMap> panels;
    nlohmann::json layers_json = nlohmann::json::array();
    const int64_t first = o.layer ? o.layer - 1 : 0,
                  last = o.layer ? o.layer : static_cast<int64_t>(kind.weights.size());
    int64_t heads = 0;
    for (int64_t l = first; l < last; ++l) {
      const Tensor& w = kind.weights[static_cast<size_t>(l)];
      heads = w.shape()[0];
      const int64_t rows = w.shape()[1], cols = w.shape()[2];
      const std::vector<float> values = w.to_vector<float>();
      nlohmann::json heads_json = nlohmann::json::array();
      for (int64_t h = 0; h < heads; ++h) {
        HeatMap m{fmt::format("layer {} head {}", l + 1, h + 1), rows, cols, {}, kind.rows, kind.cols};
        m.values.assign(values.begin() + h * rows * cols, values.begin() + (h + 1) * rows * cols);
        heads_json.push_back(nlohmann::json(m.values));
        panels.push_back(std::move(m));
      }
      layers_json.push_back({{"layer", l + 1}, {"heads", heads_json}});
    }
    json[kind.name] = layers_json;
    // The title fits a panel row: long sentences are cut (the JSON keeps them whole).
    auto cut = [](const std::string& text) {
      if (text.size() <= 60) return text;
      size_t end = 57;
      while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;  // not inside a UTF-8 character
      return text.substr(0, end) + "...";
    };
    for (const char* ext : {".png", ".svg"})
      draw_heatmaps(o.out + "-" + kind.name + ext, panels, heads,
                    {.title = fmt::format("{}: \"{}\" -> \"{}\"", kind.title, cut(o.input), cut(translation)),
                     .x_label = std::string(kind.name) == "cross" ? "source (keys)" : "keys",
                     .y_label = "queries"});
    fmt::print("{}: {} -> {}-{}.png, .svg\n", kind.title,
               o.layer ? fmt::format("layer {}, {} heads", o.layer, heads)
                       : fmt::format("{} layers x {} heads", kind.weights.size(), heads),
               o.out, kind.name);
  }
  write_file(o.out + "-weights.json", json.dump() + "\n");
  fmt::print("weights: {}-weights.json (per kind, layer, head: rows = queries, summing to 1)\n", o.out);
}

}  // namespace

void add_attention_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("attention",
                                 "heat maps of a trained model's attention on one sentence "
                                 "(encoder, decoder, cross; every head)");
  auto o = std::make_shared<AttentionOptions>();
  cmd->add_option("--model", o->model, "folder from `loom train` (model.safetensors, spm.model)")->required();
  cmd->add_option("--input", o->input, "a source sentence")->required();
  cmd->add_option("--out", o->out, "prefix of the pictures: PREFIX-encoder.png, ...")->capture_default_str();
  cmd->add_option("--layer", o->layer, "one layer (1 = first); 0: all layers as a grid")
      ->capture_default_str()
      ->check(in_range(0, models::TransformerConfig::kMaxLayers));
  cmd->add_option("--extra-len", o->extra_len, "longest translation: input length + this")
      ->capture_default_str()
      ->check(in_range(0, 1000));
  add_threads_option(*cmd, o->threads);
  cmd->callback([o] { run_attention(*o); });
}

}  // namespace loom::tools
