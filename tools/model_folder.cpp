#include "model_folder.h"

#include <filesystem>

#include "loom/autograd.h"
#include "loom/nn/init.h"

namespace loom::tools {

ModelFolder load_model_folder(const std::string& dir, const std::string& command, nn::Checksums checksums) {
  const std::string checkpoint = dir + "/model.safetensors";
  nn::TensorFile file = nn::load_safetensors(checkpoint, checksums);
  for (const auto& [name, tensor] : file.tensors)
    LOOM_CHECK(!has_non_finite(tensor), "{}: '{}': tensor '{}' holds NaN or Inf, so the model cannot decode", command,
               checkpoint, name);
  LOOM_CHECK(file.metadata.count("config") && file.metadata.count("vocabulary"),
             "{}: '{}' has no configuration or vocabulary in its metadata (not written by `loom train`?)", command,
             checkpoint);
  // The vocabulary is a file inside the folder: a name that is empty, absolute or leaves
  // the folder (../../x/spm.model) is refused, not followed.
  const std::filesystem::path vocabulary = std::filesystem::path(file.metadata.at("vocabulary")).lexically_normal();
  LOOM_CHECK(!vocabulary.empty() && vocabulary.is_relative() && *vocabulary.begin() != "..",
             "{}: '{}' names the vocabulary '{}', not a file inside the model folder", command, checkpoint,
             file.metadata.at("vocabulary"));
  const std::string vocabulary_path = (std::filesystem::path(dir) / vocabulary).string();
  LOOM_CHECK(std::filesystem::is_regular_file(vocabulary_path),
             "{}: the vocabulary '{}' that '{}' names is missing or not a file", command, vocabulary_path, checkpoint);
  ModelFolder folder;
  folder.vocab = std::make_unique<models::Vocabulary>(vocabulary_path);
  {
    nn::SkipInit loaded_next;  // nn::load fills every parameter (or refuses the checkpoint)
    folder.model =
        std::make_unique<models::Transformer>(models::TransformerConfig::from_json(file.metadata.at("config")));
  }
  nn::load(*folder.model, file, checkpoint);
  folder.model->eval();
  return folder;
}

void check_same_vocabulary(const ModelFolder& first, const ModelFolder& other, const std::string& command) {
  const models::Vocabulary &a = *first.vocab, &b = *other.vocab;
  bool same = a.size() == b.size();
  for (int64_t id = 0; same && id < a.size(); ++id) same = a.piece(id) == b.piece(id);
  LOOM_CHECK(same, "{}: an ensemble's models must share one vocabulary; '{}' and '{}' differ", command, a.path(),
             b.path());
}

}  // namespace loom::tools
