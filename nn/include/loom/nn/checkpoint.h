#pragma once
// Checkpoints as safetensors files (https://github.com/huggingface/safetensors):
// 8 bytes of little-endian header length N, N bytes of JSON
//   {"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, ...,
//    "__metadata__": {"key": "value", ...}}
// then the raw little-endian data. PyTorch (safetensors.torch.load_file) and
// Hugging Face tools read them. The model's configuration travels in the
// metadata, and so does each tensor's CRC-32 (zlib's) under "loom.crc32" (a JSON
// object of 8-digit hex strings by tensor name): safetensors has no checksum, and a
// flipped data byte would otherwise load silently. Writes go to a temporary file
// renamed over the target, so a crash never leaves half a checkpoint; reads check
// every byte count and offset and each tensor's checksum (files written before
// checksums load without one), name the file and what was wrong, and load nothing
// on error. Only regular files are read (a FIFO would block the reader forever).
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

// The metadata key of the checksums; load_safetensors verifies and removes it.
inline constexpr const char* kChecksumsKey = "loom.crc32";
// Whether a load verifies the tensors' checksums (skip: for speed, where a user asks).
enum class Checksums { verify, skip };

void save_safetensors(const std::string& path, const NamedTensors& tensors, const Metadata& metadata = {});
TensorFile load_safetensors(const std::string& path, Checksums checksums = Checksums::verify);
// Only the metadata, from the header alone (checked as load_safetensors checks it,
// every tensor's offsets against the file's size), without reading the tensors:
// for a caller that looks at many checkpoints or at a large training state.
Metadata load_safetensors_metadata(const std::string& path);

// A module's parameters under their hierarchical names.
void save(const Module& module, const std::string& path, const Metadata& metadata = {});
// Loads every parameter of `module` from `path` (CPU tensors, copied in place).
// Strict: a parameter missing from the file, a tensor of another shape or dtype,
// or (when `allow_unexpected` is false) a file tensor the module lacks is an
// error naming it, and the module is left untouched. Returns the file's metadata.
Metadata load(Module& module, const std::string& path, bool allow_unexpected = false);
// The same from a file already read (`path` names it in the errors): a caller that
// needed its metadata first (the configuration) need not read it twice.
Metadata load(Module& module, const TensorFile& file, const std::string& path, bool allow_unexpected = false);

// Checkpoint averaging as the paper does it (the last 5 checkpoints of a base
// model, the last 20 of a big one): every floating tensor is the element-wise
// mean of the inputs, summed in float64 in the order given, so the result is
// deterministic and averaging copies of one checkpoint gives its bits back.
// Needs at least two files with the same tensor names, shapes and dtypes, and
// the same "config" and "vocabulary" metadata; a difference is an error naming
// the file and the tensor or field. Integer tensors must be equal everywhere.
// The output keeps the metadata every input agrees on (config, vocabulary; not
// step or val_loss, which describe one checkpoint) plus "averaged_from", a JSON
// list of the input paths. Files are read one at a time (memory: the model in
// float64 plus one checkpoint). Returns the metadata written.
Metadata average_checkpoints(const std::vector<std::string>& paths, const std::string& out_path);

}  // namespace loom::nn
