#pragma once
// A model folder written by `loom train` (model.safetensors with its
// configuration in the metadata, and the SentencePiece vocabulary beside it),
// loaded for the commands that run a trained model.
#include <memory>
#include <string>

#include "loom/models.h"
#include "loom/nn/checkpoint.h"

namespace loom::tools {

struct ModelFolder {
  std::unique_ptr<models::Vocabulary> vocab;
  std::unique_ptr<models::Transformer> model;  // in eval mode
};

// Errors name `command` and the file at fault (and the tensor: a weight holding NaN or
// Inf is refused, as it would decode to nothing or to garbage without a word).
ModelFolder load_model_folder(const std::string& dir, const std::string& command,
                              nn::Checksums checksums = nn::Checksums::verify);

// An ensemble decodes with one vocabulary: `other`'s pieces must be `first`'s, id
// by id (the same pieces in, the same ids out), or the error names both files.
void check_same_vocabulary(const ModelFolder& first, const ModelFolder& other, const std::string& command);

}  // namespace loom::tools
