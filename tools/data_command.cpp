// `loom data prepare`: a corpus folder made into a corpus store once (loom/models/corpus_store.h),
// which `loom train --data STORE` maps at every start.
#include <fmt/format.h>

#include <chrono>
#include <memory>
#include <optional>

#include "commands.h"
#include "progress.h"

namespace loom::tools {

void show_preparation(models::PrepareOptions& how, const std::string& progress) {
  struct Shown {
    std::optional<ProgressBar> bar;
    std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  };
  auto shown = std::make_shared<Shown>();
  const ProgressMode mode = progress_mode(progress);
  how.message = [shown](const std::string& line) {
    if (shown->bar) shown->bar->finish(), shown->bar.reset();
    fmt::print("{}\n", line);
    std::fflush(stdout);
  };
  if (mode == ProgressMode::off || mode == ProgressMode::lines) return;  // the messages alone
  how.progress = [shown, mode](int64_t done, int64_t total) {
    if (!shown->bar) shown->bar.emplace(total, stdout, mode), shown->start = std::chrono::steady_clock::now();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - shown->start).count();
    shown->bar->update(done, fmt::format("encoded {} pairs, {:.0f} pairs/s", done, done / std::max(seconds, 1e-9)));
  };
}

void add_data_command(CLI::App& app) {
  auto* data = app.add_subcommand("data", "prepare corpora for training");
  data->require_subcommand(1);
  auto* cmd = data->add_subcommand(
      "prepare",
      "encode a parallel corpus once into a store that `loom train --data STORE` maps (a vocabulary trained on a "
      "sample, every pair as ids, the validation split beside them)");
  auto o = std::make_shared<models::PrepareOptions>();
  auto threads = std::make_shared<int>(2);
  auto progress = std::make_shared<std::string>("auto");
  cmd->add_option("--data", o->data, "folder with train.<lang>[.gz] (and val.<lang>[.gz], copied into the store)")
      ->required();
  cmd->add_option("--src", o->src, "source language")->capture_default_str();
  cmd->add_option("--tgt", o->tgt, "target language")->capture_default_str();
  cmd->add_option("--out", o->out, "the store's folder (must not exist)")->required();
  cmd->add_option("--vocab", o->vocab, "pieces of the joint SentencePiece vocabulary")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{5}, models::TransformerConfig::kMaxVocab));
  cmd->add_option("--vocab-sample", o->vocab_sample,
                  "SentencePiece trains on at most this many sentences: both sides of a fixed sample of pairs (a "
                  "smaller corpus: all of it)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{2}, int64_t{1} << 40));
  cmd->add_option("--vocabulary", o->vocabulary, "encode with this spm.model instead of training one");
  cmd->add_option("--max-pieces", o->max_pieces,
                  "drop pairs with a side longer than this many pieces (0: keep all; over 65535 is an error)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, models::kMaxPieces));
  cmd->add_option("--max-ratio", o->max_ratio,
                  "drop pairs whose longer side has more than this times the shorter's pieces (0: keep all)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1e9));
  cmd->add_flag("--drop-empty", o->drop_empty, "drop pairs with a blank side");
  cmd->add_flag("--drop-duplicates", o->drop_duplicates, "drop a pair seen before (both sides the same)");
  add_threads_option(*cmd, *threads);
  add_progress_option(*cmd, *progress);
  cmd->callback([o, threads, progress] {
    use_threads(*threads);
    models::PrepareOptions how = *o;
    show_preparation(how, *progress);
    models::prepare_store(how);
  });
}

}  // namespace loom::tools
