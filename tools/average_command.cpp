// `loom average`: checkpoint averaging as the paper does it (the last 5
// checkpoints of a base model, the last 20 of a big one). Writes a model folder
// that `loom translate --model` reads: <out>/model.safetensors and a copy of the
// vocabulary its metadata names, so the folder stands alone. `--validated RUN`
// averages a run folder's kept checkpoints that were validated (its epoch ends,
// say), without the snapshots kept between them.
#include <filesystem>

#include "commands.h"
#include "loom/atomic_file.h"
#include "loom/error.h"
#include "loom/models/run_folder.h"
#include "loom/nn.h"

namespace loom::tools {

namespace {

namespace fs = std::filesystem;

struct AverageOptions {
  std::string out;
  std::vector<std::string> inputs;
  std::string validated;  // a run folder whose validated kept checkpoints are the inputs
};

// A run folder (what `loom train --out` wrote) stands for its model.safetensors.
std::string checkpoint_path(const std::string& input) {
  std::error_code ec;
  return fs::is_directory(input, ec) ? (fs::path(input) / "model.safetensors").string() : input;
}

// The inputs: the checkpoints named, or those of --validated RUN.
std::vector<std::string> average_inputs(const AverageOptions& o) {
  std::vector<std::string> paths;
  for (const auto& input : o.inputs) paths.push_back(checkpoint_path(input));
  if (o.validated.empty()) return paths;
  std::error_code ec;
  LOOM_CHECK(fs::is_directory(o.validated, ec), "average: --validated '{}' is not a run folder", o.validated);
  const auto validated = models::validated_checkpoints(o.validated);
  LOOM_CHECK(validated.size() >= 2,
             "average: --validated '{}' has {} validated kept checkpoint(s) (step-N.safetensors with a validation "
             "loss); averaging needs 2 or more (train with --keep-last or --average-last covering 2 checkpoints)",
             o.validated, validated.size());
  std::vector<int64_t> steps;
  for (const auto& [step, path] : validated) {
    paths.push_back(path.string());
    steps.push_back(step);
  }
  fmt::print("average: the validated checkpoints of '{}': steps {}\n", o.validated, fmt::join(steps, ", "));
  return paths;
}

// --out may be new, or an earlier average's folder; a run folder's model (or any model
// that is not an average) is never replaced.
void check_out_folder(const std::string& out) {
  std::error_code ec;
  LOOM_CHECK(!fs::exists(fs::path(out) / "training_state.safetensors", ec),
             "average: --out '{}' holds a training run; give a new folder (its model.safetensors would be replaced)",
             out);
  const fs::path model = fs::path(out) / "model.safetensors";
  if (fs::exists(model, ec))
    LOOM_CHECK(nn::load_safetensors_metadata(model.string()).count("averaged_from"),
               "average: --out '{}' holds a model.safetensors that is not an average; give a new folder", out);
}

void run_average(const AverageOptions& o) {
  check_out_folder(o.out);
  const std::vector<std::string> paths = average_inputs(o);
  // Checked before the average is written: inputs from different runs may carry
  // the same vocabulary name for different SentencePiece models.
  const nn::Metadata first = nn::load_safetensors_metadata(paths.front());
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
  auto* checkpoints = cmd->add_option("checkpoints", o->inputs,
                                      "two or more checkpoint files, or run folders holding model.safetensors")
                          ->expected(0, -1);
  cmd->add_option("--validated", o->validated,
                  "a run folder: average its kept step-N checkpoints that were validated (epoch ends, --save-every), "
                  "not the --keep-per-epoch / --keep-every snapshots between them")
      ->excludes(checkpoints);
  cmd->callback([o] {
    // A command-line error (exit code 2), as CLI11's own are.
    if (o->validated.empty() && o->inputs.size() < 2)
      throw CLI::ValidationError("checkpoints", "give two or more checkpoints, or --validated RUN");
    run_average(*o);
  });
}

}  // namespace loom::tools
