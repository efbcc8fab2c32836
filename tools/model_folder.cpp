#include "model_folder.h"

namespace loom::tools {

ModelFolder load_model_folder(const std::string& dir, const std::string& command) {
  const std::string checkpoint = dir + "/model.safetensors";
  nn::TensorFile file = nn::load_safetensors(checkpoint);
  LOOM_CHECK(file.metadata.count("config") && file.metadata.count("vocabulary"),
             "{}: '{}' has no configuration or vocabulary in its metadata (not written by `loom train`?)", command,
             checkpoint);
  ModelFolder folder;
  folder.vocab = std::make_unique<models::Vocabulary>(dir + "/" + file.metadata.at("vocabulary"));
  folder.model = std::make_unique<models::Transformer>(models::TransformerConfig::from_json(file.metadata.at("config")));
  nn::load(*folder.model, checkpoint);
  folder.model->eval();
  return folder;
}

}  // namespace loom::tools
