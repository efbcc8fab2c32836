// `loom train`: a Transformer on a parallel corpus, the paper's recipe (Adam
// 0.9/0.98/1e-9, the Noam schedule, label smoothing 0.1, dropout), with a joint
// SentencePiece vocabulary trained on the first run. The command reads the
// corpus, builds the vocabulary and prints; models::Trainer (loom/models/trainer.h)
// trains and writes the run folder: <out>/model.safetensors (what `loom translate
// --model <out>` reads), the training state `--resume <out>` continues from, and
// the kept, best and averaged checkpoints. SIGINT / SIGTERM save the state and
// exit with 128 + the signal.
#include <fmt/format.h>
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>

#include "commands.h"
#include "options.h"
#include "stop_signals.h"
#include "test_hooks.h"
#include "training_corpus.h"
#include "training_monitor.h"
#include "loom/backend.h"
#include "loom/dist/communicator.h"
#include "loom/models.h"
#include "loom/ops.h"
#include "loom/optim.h"

namespace loom::tools {

namespace {

// Far above any rate that trains (the paper's factor is 1; 2 is common), low
// enough that a typo of a few digits is caught before a run is spent on it.
constexpr double kMaxLrFactor = 1e6;

struct TrainOptions {
  std::string data, src = "de", tgt = "en", out = "runs/multi30k-de-en", preset = "small", positions = "sinusoid",
                    resume;
  int64_t vocab = 8000;
  double dropout = -1, attention_dropout = -1, relu_dropout = -1;  // -1: the preset's (attention, relu: --dropout's)
  int64_t d_model = 0, d_ff = 0, heads = 0, layers = 0;            // 0: the preset's
  int threads = 2;
  std::string device = "cpu", best_by = "bleu", precision = "float32", communicator = "auto";
  models::TrainerOptions t;
};

// The flags a resumed run cannot change (the updates depend on them), as text:
// saved with the state, compared with those given again on --resume.
std::map<std::string, std::string> fixed_flags(const TrainOptions& o) {
  return {{"--src", o.src},
          {"--tgt", o.tgt},
          {"--preset", o.preset},
          {"--vocab", std::to_string(o.vocab)},
          {"--dropout", fmt::format("{}", o.dropout)},
          {"--attention-dropout", fmt::format("{}", o.attention_dropout)},
          {"--relu-dropout", fmt::format("{}", o.relu_dropout)},
          {"--positions", o.positions},
          {"--precision", o.precision},
          {"--d-model", std::to_string(o.d_model)},
          {"--d-ff", std::to_string(o.d_ff)},
          {"--heads", std::to_string(o.heads)},
          {"--layers", std::to_string(o.layers)},
          {"--max-tokens", std::to_string(o.t.max_tokens)},
          {"--max-len", std::to_string(o.t.max_len)},
          {"--accum", std::to_string(o.t.accum)},
          {"--warmup", std::to_string(o.t.warmup)},
          {"--lr-factor", fmt::format("{}", o.t.lr_factor)},
          {"--label-smoothing", fmt::format("{}", o.t.label_smoothing)},
          {"--clip", fmt::format("{}", o.t.clip)},
          {"--seed", std::to_string(o.t.seed)},
          {"--regroup-batches", o.t.regroup_batches ? "true" : "false"}};
}

// Refused before reading anything: an --out that is a file, or a folder loom
// cannot write in, used to surface as an uncaught std::filesystem_error.
void prepare_out(const std::string& out) {
  std::error_code ec;
  LOOM_CHECK(!std::filesystem::exists(out, ec) || std::filesystem::is_directory(out, ec),
             "train: --out '{}' exists and is not a folder", out);
  std::filesystem::create_directories(out, ec);
  LOOM_CHECK(!ec, "train: cannot create the --out folder '{}': {}", out, ec.message());
  LOOM_CHECK(::access(out.c_str(), W_OK | X_OK) == 0, "train: cannot write in the --out folder '{}': {}", out,
             std::strerror(errno));
}

// An update is --accum x ranks micro-batches, and a run resumed on another number of
// ranks keeps that product (its --accum follows, or must match when given) and its
// reduction: the exact one gives the same bits at any world size, the one-process
// sum ("off") only on one process. Runs from before data parallelism: one process.
void resume_on(int ranks, models::TrainerOptions& saved, const std::map<std::string, std::string>& extra,
               int64_t accum_given, const std::string& folder) {
  const auto it = extra.find("micro-batches per update");
  const int64_t per_update = it != extra.end() ? std::stoll(it->second) : saved.accum;
  LOOM_CHECK(ranks == 1 || saved.reduce != "off",
             "train: --resume '{}': the run was trained in one process with --reduce off, which {} ranks cannot "
             "continue bit for bit; resume it in one process (a run meant to change its number of ranks starts "
             "with --reduce exact)",
             folder, ranks);
  if (accum_given > 0) {
    LOOM_CHECK(accum_given * ranks == per_update,
               "train: --resume '{}': --accum {} on {} rank(s) makes {} micro-batches per update, the run makes {}{}",
               folder, accum_given, ranks, accum_given * ranks, per_update,
               per_update % ranks == 0 ? fmt::format(" (leave --accum out: it becomes {})", per_update / ranks) : "");
  } else {
    LOOM_CHECK(per_update % ranks == 0,
               "train: --resume '{}': the run makes {} micro-batches per update, which {} ranks cannot share evenly",
               folder, per_update, ranks);
  }
  saved.accum = per_update / ranks;
}

// --resume DIR: the run's own options, checked against the flags given again.
void take_saved_options(TrainOptions& o, const CLI::App& cmd, int ranks) {
  const models::Trainer::SavedRun saved = models::Trainer::read_state(o.resume);
  std::map<std::string, std::string> extra = saved.extra_state;
  auto text = [&](const char* key) {
    LOOM_CHECK(extra.count(key), "train: --resume '{}': the training state lacks '{}' (not written by `loom train`?)",
               o.resume, key);
    return extra.at(key);
  };
  const auto now = fixed_flags(o);
  for (const auto& [flag, value] : now)
    if (flag != "--accum" && cmd.get_option(flag)->count() > 0 && value != text(flag.c_str()))
      fail("train: {} {} differs from the resumed run's {} (a resumed run keeps the options its updates depend on)",
           flag, value, text(flag.c_str()));
  o.src = text("--src");
  o.tgt = text("--tgt");
  o.preset = text("--preset");
  o.vocab = std::stoll(text("--vocab"));
  o.precision = extra.count("--precision") ? extra.at("--precision") : "float32";  // older runs: float32
  // What best/ keeps: the run's choice unless given again (older runs: not saved, the default).
  if (cmd.get_option("--best-by")->count() == 0 && extra.count("--best-by")) o.best_by = extra.at("--best-by");
  if (cmd.get_option("--data")->count() == 0) {
    o.data = text("data");
    LOOM_CHECK(std::filesystem::is_directory(o.data),
               "train: --resume '{}': the run's corpus folder '{}' is not found from here ({}); give it with --data",
               o.resume, o.data,
               std::filesystem::path(o.data).is_relative() ? "a path relative to where the run started" : "moved?");
  }
  // What may change: given again, it wins; otherwise the run's own value.
  models::TrainerOptions merged = saved.options;
  if (merged.reduce == "auto") merged.reduce = "off";  // saved before data parallelism: one process
  auto may_change = [&](const char* flag, auto member) {
    if (cmd.get_option(flag)->count() > 0) merged.*member = o.t.*member;
  };
  using T = models::TrainerOptions;
  may_change("--epochs", &T::epochs);
  may_change("--max-steps", &T::max_steps);
  may_change("--cooldown-epochs", &T::cooldown_epochs);
  may_change("--log-every", &T::log_every);
  may_change("--save-every", &T::save_every);
  may_change("--save-minutes", &T::save_minutes);
  may_change("--keep-last", &T::keep_last);
  may_change("--keep-every", &T::keep_every);
  may_change("--keep-per-epoch", &T::keep_per_epoch);
  may_change("--average-last", &T::average_last);
  may_change("--reduce", &T::reduce);
  may_change("--shard-optimizer", &T::shard_optimizer);
  may_change("--bucket-mb", &T::bucket_mb);
  may_change("--overlap", &T::overlap);
  resume_on(ranks, merged, extra, cmd.get_option("--accum")->count() > 0 ? o.t.accum : 0, o.resume);
  o.t = merged;
  fmt::print("resuming '{}' at step {} ({} -> {}, data '{}')\n", o.out, saved.step, o.src, o.tgt, o.data);
}

models::TransformerConfig make_config(const TrainOptions& o, int64_t vocab_size) {
  models::TransformerConfig config = models::presets::by_name(o.preset, vocab_size);
  config.pad_id = models::Vocabulary::kPad;
  config.max_len = std::max(config.max_len, o.t.max_len + 1);
  if (o.dropout >= 0) config.dropout = o.dropout;
  if (o.attention_dropout >= 0) config.attention_dropout = o.attention_dropout;
  if (o.relu_dropout >= 0) config.relu_dropout = o.relu_dropout;
  config.learned_positions = o.positions == "learned";
  if (o.d_model > 0) config.d_model = o.d_model;
  if (o.d_ff > 0) config.d_ff = o.d_ff;
  if (o.heads > 0) config.heads = o.heads;
  if (o.layers > 0) config.encoder_layers = config.decoder_layers = o.layers;
  config.validate();  // e.g. --d-model not a multiple of --heads
  return config;
}

// What the run shows (tools/training_monitor.h): the progress bar, a line every
// --log-every steps and metrics.jsonl; a line per checkpoint. `monitor` outlives the run.
models::TrainerHooks monitoring_hooks(TrainingMonitor& monitor) {
  models::TrainerHooks hooks;
  hooks.gradients_ready = [&monitor](int64_t step) {
    if (monitor.is_log_step(step)) monitor.capture_gradients();  // a pass over every gradient: logged steps only
  };
  hooks.step_done = [&monitor](const models::StepReport& r) { monitor.step_done(r); };
  hooks.evaluated = [&monitor](const models::Evaluation& e) {
    monitor.validation(e.step, e.epoch, e.val_loss, e.val_score);
    const std::string bleu = e.val_score ? fmt::format(", BLEU {:.2f}", *e.val_score) : "";
    const std::string best = e.best ? " (best so far)" : "";
    monitor.print(e.epoch_end ? fmt::format("epoch {:3d} done: step {}, validation loss {:.4f}{}{}; saved {}", e.epoch,
                                            e.step, e.val_loss, bleu, best, e.saved)
                              : fmt::format("step {:6d}: validation loss {:.4f}{}{}; saved {}", e.step, e.val_loss,
                                            bleu, best, e.saved));
  };
  hooks.message = [&monitor](const std::string& text) { monitor.print(text); };
  hooks.stop = &stop_flag();
  return hooks;
}

// The bar's total (an estimate: batches hold about --max-tokens padded tokens of the
// longer side, and an update --accum of them on each rank) and the run's settings in metrics.jsonl.
int64_t estimated_steps(const TrainOptions& o, const std::vector<models::EncodedPair>& train, int ranks) {
  double tokens = 0;
  for (const models::EncodedPair& pair : train)
    tokens += static_cast<double>(std::max(pair.src.size(), pair.tgt.size()) + 1);
  const double per_update = static_cast<double>(o.t.max_tokens * o.t.accum * ranks);
  const int64_t total = o.t.epochs * static_cast<int64_t>(std::ceil(tokens / per_update));
  return o.t.max_steps > 0 ? std::min(total, o.t.max_steps) : total;
}

MonitorOptions monitor_options(const TrainOptions& o, int64_t total, const models::TransformerConfig& config) {
  return {.out = o.out,
          .log_every = o.t.log_every,
          .total_steps = total,
          .append = !o.resume.empty(),
          .run_info = {{"preset", o.preset},
                       {"seed", o.t.seed},
                       {"warmup", o.t.warmup},
                       {"lr_factor", o.t.lr_factor},
                       {"cooldown_epochs", o.t.cooldown_epochs},
                       {"label_smoothing", o.t.label_smoothing},
                       {"dropout", config.dropout},
                       {"pre_norm", config.pre_norm},
                       {"d_model", config.d_model}}};
}

// A new run never replaces a finished or interrupted one.
void refuse_existing_run(const std::string& out) {
  const std::vector<std::string> files = models::run_files(out);
  LOOM_CHECK(files.empty(),
             "train: '{}' already holds a run ({}): continue it with `loom train --resume {}`, or start "
             "afresh with another --out (or remove the folder first)",
             out, fmt::join(files, ", "), out);
}

// The values every rank of a data-parallel run must share, checked before any work:
// a rank started with other flags or data is named instead of training apart.
void agree_across_ranks(dist::Communicator& comm, const TrainOptions& o, const Split& train) {
  static constexpr std::array<const char*, 4> kPresets = {"tiny", "small", "base", "big"};
  static constexpr std::array<const char*, 4> kReduce = {"auto", "off", "exact", "fast"};
  auto index = [](const auto& names, const std::string& name) {
    return static_cast<int64_t>(std::find(names.begin(), names.end(), name) - names.begin());
  };
  auto fixed_text = fmt::format("{}", fmt::join(fixed_flags(o), ";"));
  comm.agree("train", "",
             {{"--preset", index(kPresets, o.preset),
               [](int64_t i) { return std::string(i < 4 ? kPresets[static_cast<size_t>(i)] : "another"); }},
              {"--seed", static_cast<int64_t>(o.t.seed)},
              {"--accum", o.t.accum},
              {"--shard-optimizer", o.t.shard_optimizer},
              {"--reduce", index(kReduce, o.t.reduce),
               [](int64_t i) { return std::string(i < 4 ? kReduce[static_cast<size_t>(i)] : "another"); }},
              {"training sentence pairs", static_cast<int64_t>(train.corpus.src.size())},
              {"the other options the updates depend on (a digest)",
               static_cast<int64_t>(std::hash<std::string>{}(fixed_text))}});
}

int run_train(TrainOptions o, const CLI::App& cmd, dist::Communicator& comm) {
  use_threads(o.threads);
  const bool main_rank = comm.rank() == 0;  // the one that prints, writes the folder and holds its lock
  if (!o.resume.empty()) {
    LOOM_CHECK(cmd.get_option("--out")->count() == 0 || o.out == o.resume,
               "train: --resume '{}' continues that folder's run; --out '{}' would be ignored (to branch a run off, "
               "copy its folder and --resume the copy)",
               o.resume, o.out);
    o.out = o.resume;
    take_saved_options(o, cmd, comm.world_size());
  }
  o.t.comm = &comm;  // after the saved options replaced o.t (a resumed rank trained alone before)
  if (!use_precision(o.precision, o.device)) o.precision = "float32";
  // Everything that can be refused cheaply is, before the folder is touched or a vocabulary trained.
  LOOM_CHECK(!o.data.empty(), "train: --data is required (the corpus folder)");
  o.t.device = parse_device(o.device);
  if (!comm.device().is_cpu()) {  // nccl: the rank's own GPU
    LOOM_CHECK(o.t.device.is_cuda(), "train: --communicator {} sums CUDA tensors: train with --device cuda",
               comm.backend_name());
    o.t.device = comm.device();
  }
  o.t.validate();
  make_config(o, o.vocab);                    // the preset, sizes and dropouts: validated for the vocabulary asked for
  std::optional<models::RunFolderLock> lock;  // rank 0's, held until the run ends
  if (main_rank) {
    prepare_out(o.out);
    lock.emplace(o.out, "loom train");
    if (o.resume.empty()) refuse_existing_run(o.out);
    for (const std::string& name : models::remove_stale_temporaries(o.out))
      fmt::print("train: removed '{}/{}', left by a writer that died\n", o.out, name);
  }
  const std::string spm_prefix = o.out + "/spm", spm_path = spm_prefix + ".model";
  const Split train_split = read_split(o.data, o.src, o.tgt, "train"),
              val_split = read_split(o.data, o.src, o.tgt, "val");
  const models::ParallelCorpus &train = train_split.corpus, &val = val_split.corpus;
  if (comm.world_size() > 1) agree_across_ranks(comm, o, train_split);
  fmt::print("train: {} sentence pairs ({} -> {}), validation {}\n", train.src.size(), o.src, o.tgt, val.src.size());
  if (o.resume.empty() && main_rank) prepare_vocabulary(train, spm_prefix, o.vocab);
  comm.barrier();  // the other ranks read the vocabulary rank 0 prepared
  if (!o.resume.empty()) {
    LOOM_CHECK(std::filesystem::exists(spm_path), "train: --resume '{}': the vocabulary '{}' is missing", o.resume,
               spm_path);
  }
  models::Vocabulary vocab(spm_path);
  std::vector<models::EncodedPair> train_pairs = keep_fitting(encode(vocab, train), train_split, o.t.max_len),
                                   val_pairs = keep_fitting(encode(vocab, val), val_split, o.t.max_len);
  const int64_t total_steps = estimated_steps(o, train_pairs, comm.world_size());
  std::unique_ptr<models::Trainer> trainer;
  if (o.resume.empty()) {
    std::map<std::string, std::string> extra = fixed_flags(o);
    extra["data"] = o.data;
    extra["micro-batches per update"] = std::to_string(o.t.accum * comm.world_size());
    extra["--best-by"] = o.best_by;
    trainer = std::make_unique<models::Trainer>(make_config(o, vocab.size()), o.t, std::move(train_pairs),
                                                std::move(val_pairs), o.out,
                                                std::map<std::string, std::string>{{"vocabulary", "spm.model"}}, extra);
  } else {
    trainer = models::Trainer::resume(o.out, std::move(train_pairs), std::move(val_pairs),
                                      [&](models::TrainerOptions& saved) { saved = o.t; });
    if (trainer->finished()) {
      fmt::print(
          "train: --resume '{}': nothing left to do, the run is at step {} after {} epoch(s) (--epochs {}{}); "
          "give a larger --epochs or --max-steps to train on\n",
          o.out, trainer->step(), trainer->epoch() - 1, o.t.epochs,
          o.t.max_steps > 0 ? fmt::format(", --max-steps {}", o.t.max_steps) : "");
      return 0;
    }
  }
  const models::TransformerConfig& config = trainer->config();
  fmt::print(
      "model: '{}' preset, {} parameters, d_model {}, d_ff {}, {} heads, {}+{} layers, "
      "dropout {} (attention {}, relu {}), {} positions; {} threads, {} matmuls\n",
      o.preset, trainer->model().parameter_count(), config.d_model, config.d_ff, config.heads, config.encoder_layers,
      config.decoder_layers, config.dropout, config.attention_p(), config.relu_p(),
      config.learned_positions ? "learned" : "sinusoid", o.threads, o.precision);
  if (comm.world_size() > 1) {
    fmt::print("data parallel: {} ranks ({}), {} reduction, {} micro-batches per rank per update\n", comm.world_size(),
               comm.backend_name(), trainer->options().reduce, trainer->options().accum);
    const dist::GradientReducer& reducer = *trainer->reducer();
    fmt::print("gradient buckets: {} of up to {:g} MiB, summed across ranks {}\n", reducer.bucket_count(),
               trainer->options().bucket_mb,
               reducer.overlaps() ? "while backward runs (a communication thread)" : "after backward");
    const auto [mine, all] = trainer->optimizer_state_bytes();
    fmt::print("optimizer state: Adam's moments {}, {:.2f} MiB on rank 0 of {:.2f} MiB\n",
               trainer->options().shard_optimizer ? "sharded" : "on every rank", mine / 1048576.0, all / 1048576.0);
  }
  std::fflush(stdout);
  // Only rank 0 shows the run and writes metrics.jsonl; every rank stops on a signal.
  std::optional<TrainingMonitor> monitor;
  models::TrainerHooks hooks;
  if (main_rank) {
    monitor.emplace(trainer->model(), monitor_options(o, total_steps, config));
    hooks = monitoring_hooks(*monitor);
  } else {
    hooks.stop = &stop_flag();
  }
  poison_for_tests(hooks, *trainer);
  // --best-by bleu: greedy BLEU of every validation sentence at each checkpoint.
  std::vector<std::vector<int64_t>> val_sources;
  if (o.best_by == "bleu" && main_rank) {
    for (const std::string& line : val.src) {
      std::vector<int64_t> ids = vocab.encode(line);
      if (static_cast<int64_t>(ids.size()) > config.max_len - 2) ids.resize(static_cast<size_t>(config.max_len - 2));
      val_sources.push_back(std::move(ids));
    }
    hooks.validation_score = [&](models::Transformer& model) {
      return models::greedy_bleu(model, vocab, val_sources, val.tgt);
    };
  }
  StopScope stoppable;  // the first SIGINT / SIGTERM: save after the update under way and return
  const bool finished = trainer->run(hooks);
  return finished ? 0 : 128 + stop_signal();  // the shell's code for a signal, after a clean save
}

}  // namespace

void add_train_command(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("train", "train a Transformer on a parallel corpus (Multi30k layout)");
  auto o = std::make_shared<TrainOptions>();
  models::TrainerOptions& t = o->t;
  cmd->add_option("--data", o->data, "folder with train.<lang>[.gz] and val.<lang>[.gz] (a resumed run: the run's)");
  cmd->add_option("--resume", o->resume,
                  "continue the run in this folder from its training state, bit for bit (its --out)");
  cmd->add_option("--src", o->src, "source language suffix")->capture_default_str();
  cmd->add_option("--tgt", o->tgt, "target language suffix")->capture_default_str();
  cmd->add_option("--out", o->out, "folder for spm.model, model.safetensors and the training state")
      ->capture_default_str();
  cmd->add_option("--preset", o->preset, "tiny, small, base or big")->capture_default_str();
  cmd->add_option("--vocab", o->vocab, "SentencePiece pieces (first run)")
      ->capture_default_str()
      ->check(in_range(5, models::TransformerConfig::kMaxVocab));
  cmd->add_option("--max-tokens", t.max_tokens,
                  "tokens per batch: sentences x longest side, so each side's padded tokens (source and target) "
                  "stay within it; above --max-len (a batch holds a sentence)")
      ->capture_default_str()
      ->check(at_least(2));
  cmd->add_option("--accum", t.accum, "batches per update (gradient accumulation: --max-tokens x this per update)")
      ->capture_default_str()
      ->check(in_range(1, 1 << 20));
  cmd->add_option("--max-len", t.max_len, "longest sentence kept, in pieces")
      ->capture_default_str()
      ->check(in_range(1, models::TransformerConfig::kMaxLen - 1));
  cmd->add_option("--epochs", t.epochs, "passes over the corpus")->capture_default_str()->check(at_least(1));
  cmd->add_option("--max-steps", t.max_steps, "stop after this many updates (0: no limit)")
      ->capture_default_str()
      ->check(at_least(0));
  cmd->add_option("--warmup", t.warmup, "Noam warm-up steps")->capture_default_str()->check(at_least(1));
  cmd->add_option("--lr-factor", t.lr_factor, "Noam factor")->capture_default_str()->check(in_range(0, kMaxLrFactor));
  cmd->add_option("--cooldown-epochs", t.cooldown_epochs,
                  "scale the Noam rate down linearly to ~0 over the last this-many of --epochs (0: off)")
      ->capture_default_str()
      ->check(in_range(0.0, 1e6));
  cmd->add_option("--clip", t.clip, "clip the global gradient norm to this (0: off)")
      ->capture_default_str()
      ->check(in_range(0, 1e6));
  cmd->add_flag("--regroup-batches", t.regroup_batches,
                "group each epoch's batches anew (sentences of equal lengths in a drawn order, so batch companions "
                "change) instead of the same batches in a new order");
  cmd->add_option("--dropout", o->dropout, "residual dropout, and the default of the two below (default: the preset's)")
      ->check(in_range(0, 1, true));
  cmd->add_option("--attention-dropout", o->attention_dropout, "dropout on attention weights (default: --dropout)")
      ->check(in_range(0, 1, true));
  cmd->add_option("--relu-dropout", o->relu_dropout, "dropout after the feed-forward's ReLU (default: --dropout)")
      ->check(in_range(0, 1, true));
  cmd->add_option("--positions", o->positions, "sinusoid (the paper's) or learned (Table 3, row E)")
      ->capture_default_str()
      ->check(CLI::IsMember({"sinusoid", "learned"}));
  constexpr auto kMaxWidth = static_cast<double>(models::TransformerConfig::kMaxWidth);  // the config's own bound
  cmd->add_option("--d-model", o->d_model, "model width (default: the preset's)")->check(in_range(1, kMaxWidth));
  cmd->add_option("--d-ff", o->d_ff, "feed-forward inner width (default: the preset's)")->check(in_range(1, kMaxWidth));
  cmd->add_option("--heads", o->heads, "attention heads, dividing --d-model (default: the preset's)")
      ->check(in_range(1, 1024));
  cmd->add_option("--layers", o->layers, "encoder and decoder layers each (default: the preset's)")
      ->check(in_range(1, 256));
  cmd->add_option("--label-smoothing", t.label_smoothing, "label smoothing")
      ->capture_default_str()
      ->check(in_range(0, 1, true));
  add_threads_option(*cmd, o->threads);
  add_precision_option(*cmd, o->precision);
  cmd->add_option("--best-by", o->best_by,
                  "what best/ keeps: bleu (greedy BLEU of the validation set, printed at each checkpoint) or loss")
      ->check(CLI::IsMember({"bleu", "loss"}))
      ->capture_default_str();
  add_device_option(*cmd, o->device);
  cmd->add_option("--seed", t.seed, "initialization, shuffling and dropout seed")
      ->capture_default_str()
      ->check(seed_range());
  cmd->add_option("--log-every", t.log_every, "steps between progress lines")
      ->capture_default_str()
      ->check(at_least(1));
  cmd->add_option("--save-every", t.save_every, "also save a checkpoint every this many steps (0: at epoch ends only)")
      ->capture_default_str()
      ->check(at_least(0));
  cmd->add_option("--save-minutes", t.save_minutes, "also save a checkpoint every this many minutes (0: off)")
      ->capture_default_str()
      ->check(in_range(0, 1e6));
  cmd->add_option("--keep-last", t.keep_last, "keep the last K checkpoints as step-<N>.safetensors (0: none)")
      ->capture_default_str()
      ->check(in_range(0, 1 << 20));
  cmd->add_option("--keep-every", t.keep_every,
                  "also keep the weights every this many steps among the last K (step-<N>.safetensors; no validation "
                  "or training state, so cheap: more models for --average-last); 0: off")
      ->capture_default_str()
      ->check(at_least(0));
  cmd->add_option("--keep-per-epoch", t.keep_per_epoch,
                  "or keep the weights at this many evenly spaced points of each epoch, its end one of them (2: the "
                  "middle and the end, whatever an epoch's steps); 0: off")
      ->capture_default_str()
      ->check(at_least(0));
  cmd->add_option("--average-last", t.average_last, "at the end, average the last K checkpoints into <out>/average")
      ->capture_default_str()
      ->check(in_range(0, 1 << 20));
  cmd->add_option("--reduce", t.reduce,
                  "how an update's micro-batch gradients are summed: exact (a fixed tree over the micro-batch index: "
                  "the same bits on any number of ranks), fast (MPI's own all-reduce across ranks: bits may differ "
                  "with the rank count), off (added into the gradients one after another: one process only). "
                  "Default: off for one process, exact under mpirun")
      ->check(CLI::IsMember({"exact", "fast", "off"}));
  cmd->add_flag("--shard-optimizer", t.shard_optimizer,
                "data-parallel runs: each rank keeps Adam's moments for 1/N of the parameters and updates those "
                "(ZeRO stage 1; the same bits, less memory per rank)");
  cmd->add_option("--bucket-mb", t.bucket_mb,
                  "data-parallel runs: gradients are summed across ranks in buckets of about this many MiB, each "
                  "as soon as backward has made it (PyTorch DDP's bucket_cap_mb; the bits do not change)")
      ->capture_default_str()
      ->check(CLI::Range(1e-6, 1e6));
  cmd->add_option("--overlap", t.overlap,
                  "data-parallel runs: sum the buckets on a communication thread while backward runs (on), or "
                  "after backward (off); the bits do not change")
      ->capture_default_str();
  cmd->add_option("--communicator", o->communicator,
                  "how ranks exchange gradients: auto (mpi under mpirun, else one process), mpi, or nccl (each rank "
                  "on its own GPU, --device cuda; the ranks still come from mpirun)")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "self", "mpi", "nccl"}));
  cmd->callback([o, cmd, &exit_code] {
    // Under mpirun (see README, Data-parallel training) each process is a rank; else "self".
    const std::unique_ptr<dist::Communicator> comm = dist::make_communicator(o->communicator);
    if (comm->world_size() == 1) {
      exit_code = run_train(*o, *cmd, *comm);
      return;
    }
    if (comm->rank() != 0) std::freopen("/dev/null", "w", stdout);  // only rank 0 prints
    try {
      exit_code = run_train(*o, *cmd, *comm);
    } catch (const std::exception& e) {
      // The other ranks may be waiting in a collective: end them all, naming the cause.
      comm->abort(1, e.what());
    }
  });
}

}  // namespace loom::tools
