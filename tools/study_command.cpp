// `loom study NAME`: the registry of studies (tools/study.h).
#include <filesystem>
#include <functional>
#include <map>

#include "commands.h"
#include "loom/atomic_file.h"
#include "loom/error.h"
#include "options.h"
#include "study.h"

namespace loom::tools {

void write_table(const StudyOptions& o, const std::string& name, const Table& table) {
  std::string csv, markdown = "|";
  for (size_t c = 0; c < table.columns.size(); ++c) {
    csv += (c ? "," : "") + table.columns[c];
    markdown += " " + table.columns[c] + " |";
  }
  csv += "\n";
  markdown += "\n|";
  for (size_t c = 0; c < table.columns.size(); ++c) markdown += "---|";
  markdown += "\n";
  constexpr size_t kShownRows = 16;  // a long table is read in its CSV; the terminal gets its start
  for (size_t r = 0; r < table.rows.size(); ++r) {
    const auto& row = table.rows[r];
    for (size_t c = 0; c < row.size(); ++c) csv += fmt::format("{}{:.9g}", c ? "," : "", row[c]);
    csv += "\n";
    if (r >= kShownRows) continue;
    markdown += "|";
    for (double value : row) markdown += fmt::format(" {:.4g} |", value);
    markdown += "\n";
  }
  if (table.rows.size() > kShownRows)
    markdown += fmt::format("({} more rows in the CSV)\n", table.rows.size() - kShownRows);
  write_file(o.out + "/" + name + ".csv", csv);
  fmt::print("{}\ntable: {}/{}.csv\n", markdown, o.out, name);
}

namespace {

const std::map<std::string, std::function<void(const StudyOptions&)>>& studies() {
  static const std::map<std::string, std::function<void(const StudyOptions&)>> all = {
      {"scaling", study_scaling},
      {"positions", study_positions},
      {"noam", study_noam},
      {"masks", study_masks},
      {"label-smoothing", study_label_smoothing},
      {"norm-warmup", study_norm_warmup}};
  return all;
}

}  // namespace

void add_study_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("study", "the paper's questions answered by measurement: a plot and a table");
  auto o = std::make_shared<StudyOptions>();
  auto name = std::make_shared<std::string>();
  std::string names;
  for (const auto& [n, f] : studies()) names += (names.empty() ? "" : ", ") + n;
  cmd->add_option("name", *name, "the study: " + names)->required();
  cmd->add_option("--out", o->out, "folder for <name>.png, .svg and .csv")->capture_default_str();
  cmd->add_option("--data", o->data, "Multi30k-layout folder (train.<lang>, val.<lang>) for the studies that train");
  cmd->add_option("--sentences", o->sentences, "training pairs read by the studies that train")
      ->capture_default_str()
      ->check(in_range(10, 1000000));
  cmd->add_option("--vocab", o->vocab, "SentencePiece pieces of those studies' vocabulary")
      ->capture_default_str()
      ->check(in_range(5, 1000000));
  cmd->add_option("--steps", o->steps, "training steps of those studies (0: the study's default)")
      ->capture_default_str()
      ->check(in_range(0, 1000000));
  add_threads_option(*cmd, o->threads);
  cmd->add_option("--seed", o->seed, "random seed")->capture_default_str();
  cmd->callback([o, name, names] {
    auto it = studies().find(*name);
    LOOM_CHECK(it != studies().end(), "study: no study named '{}' (the studies are {})", *name, names);
    use_threads(o->threads);
    std::error_code ec;
    std::filesystem::create_directories(o->out, ec);
    LOOM_CHECK(!ec && std::filesystem::is_directory(o->out), "study: cannot create the --out folder '{}'", o->out);
    it->second(*o);
  });
}

}  // namespace loom::tools
