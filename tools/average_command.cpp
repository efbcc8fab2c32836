// `loom average`: checkpoint averaging as the paper does it (the last 5
// checkpoints of a base model, the last 20 of a big one). Writes a model folder
// that `loom translate --model` reads: <out>/model.safetensors and a copy of the
// vocabulary its metadata names, so the folder stands alone.
#include <filesystem>
#include <fstream>
#include <sstream>
#include <cerrno>
#include <cstring>

#include "commands.h"
#include "loom/atomic_file.h"
#include "loom/error.h"
#include "loom/nn.h"

namespace loom::tools {

namespace {

namespace fs = std::filesystem;

struct AverageOptions {
  std::string out;
  std::vector<std::string> inputs;
};

// A run folder (what `loom train --out` wrote) stands for its model.safetensors.
std::string checkpoint_path(const std::string& input) {
  std::error_code ec;
  return fs::is_directory(input, ec) ? (fs::path(input) / "model.safetensors").string() : input;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  LOOM_CHECK(in.good(), "average: cannot open the vocabulary '{}': {}", path, std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

void run_average(const AverageOptions& o) {
  std::vector<std::string> paths;
  for (const auto& input : o.inputs) paths.push_back(checkpoint_path(input));
  // Checked before the average is written: inputs from different runs may carry
  // the same vocabulary name for different SentencePiece models.
  const nn::Metadata first = nn::load_safetensors(paths.front()).metadata;
  std::string vocabulary;
  fs::path vocabulary_name;
  if (first.count("vocabulary")) {
    vocabulary_name = first.at("vocabulary");
    const fs::path first_vocabulary = fs::path(paths.front()).parent_path() / vocabulary_name;
    vocabulary = read_file(first_vocabulary.string());
    for (size_t i = 1; i < paths.size(); ++i) {
      const fs::path other = fs::path(paths[i]).parent_path() / vocabulary_name;
      std::error_code ec;
      if (fs::exists(other, ec))
        LOOM_CHECK(read_file(other.string()) == vocabulary, "average: the vocabulary '{}' differs from '{}'",
                   other.string(), first_vocabulary.string());
    }
  }
  std::error_code ec;
  const bool made_out = !fs::exists(o.out, ec);
  fs::create_directories(o.out);
  const std::string out_path = (fs::path(o.out) / "model.safetensors").string();
  try {
    nn::average_checkpoints(paths, out_path);
    if (!vocabulary.empty()) write_file((fs::path(o.out) / vocabulary_name).string(), vocabulary);
  } catch (...) {
    if (made_out && fs::is_empty(o.out, ec)) fs::remove(o.out, ec);  // a failed average leaves no empty --out
    throw;
  }
  fmt::print("averaged {} checkpoints -> {}\n", paths.size(), out_path);
}

}  // namespace

void add_average_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("average", "average checkpoints element-wise (the paper: last 5 base, last 20 big)");
  auto o = std::make_shared<AverageOptions>();
  cmd->add_option("--out", o->out, "folder for the averaged model.safetensors and its vocabulary")->required();
  cmd->add_option("checkpoints", o->inputs, "two or more checkpoint files, or run folders holding model.safetensors")
      ->required()
      ->expected(2, -1);
  cmd->callback([o] { run_average(*o); });
}

}  // namespace loom::tools
