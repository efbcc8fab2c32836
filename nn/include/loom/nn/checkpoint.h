#pragma once
// Checkpoints as safetensors files (https://github.com/huggingface/safetensors):
// 8 bytes of little-endian header length N, N bytes of JSON
//   {"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, ...,
//    "__metadata__": {"key": "value", ...}}
// then the raw little-endian data. PyTorch (safetensors.torch.load_file) and
// Hugging Face tools read them. The model's configuration travels in the
// metadata. Writes go to a temporary file renamed over the target, so a crash
// never leaves half a checkpoint; reads check every byte count and offset and
// name the file and what was wrong, and load nothing on error.
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "loom/nn/module.h"

namespace loom::nn {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;
using Metadata = std::map<std::string, std::string>;

struct TensorFile {
  NamedTensors tensors;  // in file order (by data offset)
  Metadata metadata;
};

void save_safetensors(const std::string& path, const NamedTensors& tensors, const Metadata& metadata = {});
TensorFile load_safetensors(const std::string& path);

// A module's parameters under their hierarchical names.
void save(const Module& module, const std::string& path, const Metadata& metadata = {});
// Loads every parameter of `module` from `path` (CPU tensors, copied in place).
// Strict: a parameter missing from the file, a tensor of another shape or dtype,
// or (when `allow_unexpected` is false) a file tensor the module lacks is an
// error naming it, and the module is left untouched. Returns the file's metadata.
Metadata load(Module& module, const std::string& path, bool allow_unexpected = false);

}  // namespace loom::nn
