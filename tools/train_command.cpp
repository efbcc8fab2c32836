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
#include "training_monitor.h"
#include "loom/backend.h"
#include "loom/dist/communicator.h"
#include "loom/models.h"
#include "loom/ops.h"
#include "loom/optim.h"

namespace loom::tools {

namespace {

struct TrainOptions {
  std::string data, out = "runs/multi30k-de-en", resume;
  // The rows of train_fields(): the model's shape and the vocabulary, saved as text with the state.
  std::string src = "de", tgt = "en", preset = "small", positions = "sinusoid", precision = "float32", best_by = "bleu";
  int64_t vocab = 8000;
  double dropout = -1, attention_dropout = -1, relu_dropout = -1;  // -1: the preset's (attention, relu: --dropout's)
  int64_t d_model = 0, d_ff = 0, heads = 0, layers = 0;            // 0: the preset's
  // This process's own.
  int threads = 2;
  std::string device = "cpu", communicator = "auto", progress = "auto";
  double collective_timeout = -1;  // minutes; -1: the communicator's default
  models::TrainerOptions t;        // its rows: models::TrainerOptions::fields()
};

// The command's own options, one row each (see loom/models/option_table.h); a row's
// key is its flag, the name it is saved under in the state's extras.
const std::vector<models::OptionField<TrainOptions>>& train_fields() {
  using O = TrainOptions;
  using enum models::OnResume;
  using models::between;
  constexpr auto kMaxWidth = static_cast<double>(models::TransformerConfig::kMaxWidth);
  constexpr auto kMaxVocab = static_cast<double>(models::TransformerConfig::kMaxVocab);
  constexpr models::Range kProbability{.lo = 0, .hi = 1, .below_hi = true};
  static const std::vector<models::OptionField<O>> table = {
      {"--src", "--src", &O::src, "source language suffix"},
      {"--tgt", "--tgt", &O::tgt, "target language suffix"},
      {"--preset",
       "--preset",
       &O::preset,
       "tiny, small, base or big",
       {},
       std::vector<std::string_view>(models::presets::kNames.begin(), models::presets::kNames.end())},
      {"--vocab", "--vocab", &O::vocab, "SentencePiece pieces (first run)", between(5, kMaxVocab)},
      {"--dropout",
       "--dropout",
       &O::dropout,
       "residual dropout, and the default of the two below (default: the preset's)",
       kProbability,
       {},
       kept,
       false,
       /*show_default=*/false},
      {"--attention-dropout",
       "--attention-dropout",
       &O::attention_dropout,
       "dropout on attention weights (default: --dropout)",
       kProbability,
       {},
       kept,
       false,
       false},
      {"--relu-dropout",
       "--relu-dropout",
       &O::relu_dropout,
       "dropout after the feed-forward's ReLU (default: --dropout)",
       kProbability,
       {},
       kept,
       false,
       false},
      {"--positions",
       "--positions",
       &O::positions,
       "sinusoid (the paper's) or learned (Table 3, row E)",
       {},
       {"sinusoid", "learned"}},
      {"--d-model",
       "--d-model",
       &O::d_model,
       "model width (default: the preset's)",
       between(1, kMaxWidth),
       {},
       kept,
       false,
       false},
      {"--d-ff",
       "--d-ff",
       &O::d_ff,
       "feed-forward inner width (default: the preset's)",
       between(1, kMaxWidth),
       {},
       kept,
       false,
       false},
      {"--heads",
       "--heads",
       &O::heads,
       "attention heads, dividing --d-model (default: the preset's)",
       between(1, 1024),
       {},
       kept,
       false,
       false},
      {"--layers",
       "--layers",
       &O::layers,
       "encoder and decoder layers each (default: the preset's)",
       between(1, 256),
       {},
       kept,
       false,
       false},
      {"--precision", "--precision", &O::precision, kPrecisionHelp, {}, {"float32", "bf16", "mixed"}},
      {"--best-by",
       "--best-by",
       &O::best_by,
       "what best/ keeps: bleu (greedy BLEU of the validation set, printed at each checkpoint) or loss",
       {},
       {"bleu", "loss"},
       may_change},
  };
  return table;
}

// One flag of `cmd` per row, writing into `value` (which outlives the parse): its
// range or choices checked by CLI11, with the messages of options.h.
template <typename T, typename Owner>
void add_field(CLI::App& cmd, T& value, const models::OptionField<Owner>& f) {
  if constexpr (std::is_same_v<T, models::MicroBatchSum>) {
    cmd.add_option_function<std::string>(
           f.flag,
           [&value, &f](const std::string& text) {
             value = static_cast<models::MicroBatchSum>(models::choice_index(f, text));  // checked below
           },
           f.help)
        ->check(CLI::IsMember(std::vector<std::string>(f.choices.begin(), f.choices.end())))
        ->default_str(std::string(models::name_of(value)));
  } else if constexpr (std::is_same_v<T, bool>) {
    if (f.switch_only)
      cmd.add_flag(f.flag, value, f.help);
    else
      cmd.add_option(f.flag, value, f.help)->capture_default_str();
  } else {
    CLI::Option* option = cmd.add_option(f.flag, value, f.help);
    if (f.show_default) option->capture_default_str();
    if constexpr (std::is_same_v<T, uint64_t>)
      option->check(seed_range());
    else if constexpr (std::is_arithmetic_v<T>)
      option->check(in_range(f.range));
    else if (!f.choices.empty())
      option->check(CLI::IsMember(std::vector<std::string>(f.choices.begin(), f.choices.end())));
  }
}

template <typename Owner>
void add_fields(CLI::App& cmd, Owner& o, const std::vector<models::OptionField<Owner>>& fields) {
  for (const auto& f : fields) std::visit([&](auto member) { add_field(cmd, o.*member, f); }, f.member);
}

// What a new run saves of the command's own options (resume reads them back).
std::map<std::string, std::string> saved_flags(const TrainOptions& o) {
  std::map<std::string, std::string> saved;
  for (const auto& f : train_fields())
    if (f.on_resume != models::OnResume::not_saved) saved[f.key] = text_of(o, f);
  return saved;
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
  LOOM_CHECK(ranks == 1 || saved.reduce != models::MicroBatchSum::off,
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

[[noreturn]] void refuse_change(const char* flag, const std::string& now, const std::string& then) {
  fail("train: {} {} differs from the resumed run's {} (a resumed run keeps the options its updates depend on)", flag,
       now, then);
}

// --resume DIR: the run's own options, checked against the flags given again: a kept
// option given again must equal the run's, a changeable one given again wins.
void take_saved_options(TrainOptions& o, const CLI::App& cmd, int ranks) {
  using enum models::OnResume;
  const models::Trainer::SavedRun saved = models::Trainer::read_state(o.resume);
  const std::map<std::string, std::string>& extra = saved.extra_state;
  LOOM_CHECK(extra.count("data"),
             "train: --resume '{}': the training state lacks 'data' (not written by `loom train`?)", o.resume);
  auto given = [&](const char* flag) { return cmd.get_option(flag)->count() > 0; };
  // The command's own options, as text in the state's extras (one saved before an
  // option existed ran with its default: --precision float32).
  const TrainOptions defaults;
  for (const auto& f : train_fields()) {
    if (f.on_resume == not_saved) continue;
    const auto it = extra.find(f.key);
    const std::string then = it != extra.end() ? it->second : text_of(defaults, f);
    if (f.on_resume == kept && given(f.flag) && text_of(o, f) != then) refuse_change(f.flag, text_of(o, f), then);
    if (f.on_resume == kept || !given(f.flag)) set_from_text(o, f, then, "train: --resume");
  }
  if (!given("--data")) {
    o.data = extra.at("data");
    // A corpus folder's run trains from its own store (<out>/corpus): the folder is needed only before that existed.
    LOOM_CHECK(std::filesystem::is_directory(o.data) || models::is_store(o.out + "/corpus"),
               "train: --resume '{}': the run's corpus folder '{}' is not found from here ({}); give it with --data",
               o.resume, o.data,
               std::filesystem::path(o.data).is_relative() ? "a path relative to where the run started" : "moved?");
  }
  // The Trainer's, from its saved options.
  models::TrainerOptions merged = saved.options;
  if (merged.reduce == models::MicroBatchSum::automatic)
    merged.reduce = models::MicroBatchSum::off;  // before data parallelism
  for (const auto& f : models::TrainerOptions::fields()) {
    if (!given(f.flag)) continue;
    if (f.on_resume == may_change)
      std::visit([&](auto member) { merged.*member = o.t.*member; }, f.member);
    else if (std::string_view(f.flag) != "--accum" && text_of(o.t, f) != text_of(merged, f))  // --accum: resume_on
      refuse_change(f.flag, text_of(o.t, f), text_of(merged, f));
  }
  resume_on(ranks, merged, extra, given("--accum") ? o.t.accum : 0, o.resume);
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
int64_t estimated_steps(const TrainOptions& o, const models::PairSource& train, int ranks) {
  double tokens = 0;
  for (const models::PairLength& pair : train.lengths())
    if (models::fits(pair, o.t.max_len)) tokens += static_cast<double>(std::max(pair.src, pair.tgt) + 1);
  const double per_update = static_cast<double>(o.t.max_tokens * o.t.accum * ranks);
  const int64_t total = o.t.epochs * static_cast<int64_t>(std::ceil(tokens / per_update));
  return o.t.max_steps > 0 ? std::min(total, o.t.max_steps) : total;
}

MonitorOptions monitor_options(const TrainOptions& o, int64_t total, const models::TransformerConfig& config) {
  return {.out = o.out,
          .progress = progress_mode(o.progress),
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
void agree_across_ranks(dist::Communicator& comm, const TrainOptions& o) {
  std::vector<dist::Agreed> values;
  auto add = [&](const auto& owner, const auto& fields) {
    for (const auto& f : fields)
      if (f.on_resume != models::OnResume::not_saved)
        values.push_back({f.flag, agreed_value(owner, f), [&f](int64_t v) { return show_agreed(f, v); }});
  };
  add(o, train_fields());
  add(o.t, models::TrainerOptions::fields());
  comm.agree("train", "", values);
}

// The same for the corpus each rank opened (a store: one fingerprint for all its pairs).
void agree_on_corpus(dist::Communicator& comm, const models::CorpusStore& store) {
  comm.agree("train", "",
             {{"corpus fingerprint", static_cast<int64_t>(store.fingerprint()),
               [](int64_t v) { return fmt::format("{:016x}", static_cast<uint64_t>(v)); }},
              {"training sentence pairs", store.size(), {}}});
}

// --data STORE: the store's languages and vocabulary size are the run's (given ones must
// agree); --data DIR: its training files exist (checked before the folder is touched).
void settle_corpus(TrainOptions& o, const CLI::App& cmd) {
  if (!models::is_store(o.data)) {
    for (const std::string& lang : {o.src, o.tgt}) models::corpus_file(o.data, "train", lang, "train");
    return;
  }
  const models::StoreManifest m = models::read_manifest(o.data);
  auto take = [&](const char* flag, auto& value, const auto& stored) {
    LOOM_CHECK(cmd.get_option(flag)->count() == 0 || value == stored,
               "train: {} {} differs from the store '{}', prepared with {} {} (prepare another store for it)", flag,
               value, o.data, flag, stored);
    value = stored;
  };
  take("--src", o.src, m.src);
  take("--tgt", o.tgt, m.tgt);
  take("--vocab", o.vocab, m.pieces);
}

// The run's options settled: a resumed run's own, the precision this machine gives,
// the device, and everything that can be refused cheaply refused, before the folder
// is touched or a vocabulary trained.
void settle_options(TrainOptions& o, const CLI::App& cmd, dist::Communicator& comm) {
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
  LOOM_CHECK(!o.data.empty(), "train: --data is required (the corpus folder)");
  o.t.device = parse_device(o.device);
  if (!comm.device().is_cpu()) {  // nccl: the rank's own GPU
    LOOM_CHECK(o.t.device.is_cuda(), "train: --communicator {} sums CUDA tensors: train with --device cuda",
               comm.backend_name());
    o.t.device = comm.device();
  }
  if (o.resume.empty()) settle_corpus(o, cmd);
  o.t.validate();
  make_config(o, o.vocab);  // the preset, sizes and dropouts: validated for the vocabulary asked for
}

// Rank 0's hold on the run folder, until the run ends: made, locked, refused if it
// holds another run (a new one), and cleared of a dead writer's temporaries.
void claim_folder(const TrainOptions& o, std::optional<models::RunFolderLock>& lock) {
  prepare_out(o.out);
  lock.emplace(o.out, "loom train");
  if (o.resume.empty()) refuse_existing_run(o.out);
  for (const std::string& name : models::remove_stale_temporaries(o.out))
    fmt::print("train: removed '{}/{}', left by a writer that died\n", o.out, name);
}

// A new run, or the resumed one; null (said so) when a resumed run has nothing left to do.
std::unique_ptr<models::Trainer> start_trainer(const TrainOptions& o, int ranks, int64_t vocab_size,
                                               std::shared_ptr<const models::PairSource> train,
                                               std::vector<models::EncodedPair> val) {
  if (o.resume.empty()) {
    std::map<std::string, std::string> extra = saved_flags(o);
    extra["data"] = o.data;
    extra["micro-batches per update"] = std::to_string(o.t.accum * ranks);
    return std::make_unique<models::Trainer>(make_config(o, vocab_size), o.t, std::move(train), std::move(val), o.out,
                                             std::map<std::string, std::string>{{"vocabulary", "spm.model"}}, extra);
  }
  auto trainer = models::Trainer::resume(o.out, std::move(train), std::move(val),
                                         [&](models::TrainerOptions& saved) { saved = o.t; });
  if (!trainer->finished()) return trainer;
  fmt::print(
      "train: --resume '{}': nothing left to do, the run is at step {} after {} epoch(s) (--epochs {}{}); "
      "give a larger --epochs or --max-steps to train on\n",
      o.out, trainer->step(), trainer->epoch() - 1, o.t.epochs,
      o.t.max_steps > 0 ? fmt::format(", --max-steps {}", o.t.max_steps) : "");
  return nullptr;
}

void print_setup(const TrainOptions& o, models::Trainer& trainer, const dist::Communicator& comm) {
  const models::TransformerConfig& config = trainer.config();
  fmt::print(
      "model: '{}' preset, {} parameters, d_model {}, d_ff {}, {} heads, {}+{} layers, "
      "dropout {} (attention {}, relu {}), {} positions; {} threads, precision {}\n",
      o.preset, trainer.model().parameter_count(), config.d_model, config.d_ff, config.heads, config.encoder_layers,
      config.decoder_layers, config.dropout, config.attention_p(), config.relu_p(),
      config.learned_positions ? "learned" : "sinusoid", o.threads, o.precision);
  if (comm.world_size() > 1) {
    fmt::print("data parallel: {} ranks ({}), {} reduction, {} micro-batches per rank per update\n", comm.world_size(),
               comm.backend_name(), models::name_of(trainer.options().reduce), trainer.options().accum);
    const dist::GradientReducer& reducer = *trainer.reducer();
    fmt::print("gradient buckets: {} of up to {:g} MiB, summed across ranks {}\n", reducer.bucket_count(),
               trainer.options().bucket_mb,
               reducer.overlaps() ? "while backward runs (a communication thread)" : "after backward");
    const auto [mine, all] = trainer.optimizer_state_bytes();
    fmt::print("optimizer state: Adam's moments {}, {:.2f} MiB on rank 0 of {:.2f} MiB\n",
               trainer.options().shard_optimizer ? "sharded" : "on every rank", mine / 1048576.0, all / 1048576.0);
  }
  std::fflush(stdout);
}

// --best-by bleu: the validation sources, cut to the model's length, for greedy BLEU at each checkpoint.
std::vector<std::vector<int64_t>> validation_sources(const models::Vocabulary& vocab, const models::ParallelCorpus& val,
                                                     int64_t max_len) {
  std::vector<std::vector<int64_t>> sources;
  for (const std::string& line : val.src) {
    std::vector<int64_t> ids = vocab.encode(line);
    if (static_cast<int64_t>(ids.size()) > max_len - 2) ids.resize(static_cast<size_t>(max_len - 2));
    sources.push_back(std::move(ids));
  }
  return sources;
}

int run_train(TrainOptions o, const CLI::App& cmd, dist::Communicator& comm) {
  use_threads(o.threads);
  const bool main_rank = comm.rank() == 0;  // the one that prints, writes the folder and holds its lock
  settle_options(o, cmd, comm);
  std::optional<models::RunFolderLock> lock;
  if (main_rank) claim_folder(o, lock);
  if (comm.world_size() > 1) agree_across_ranks(comm, o);
  std::shared_ptr<const models::CorpusStore> store;
  if (main_rank) {
    models::PrepareOptions how{.data = o.data, .src = o.src, .tgt = o.tgt, .vocab = o.vocab};
    show_preparation(how, o.progress);
    store = models::prepare_run_corpus(o.out, how, !o.resume.empty());
  }
  comm.barrier();  // the other ranks map the store and read the vocabulary rank 0 prepared
  if (!main_rank)
    store = std::make_shared<const models::CorpusStore>(models::is_store(o.data) ? o.data : o.out + "/corpus");
  const std::string& store_dir = store->dir();
  if (comm.world_size() > 1) agree_on_corpus(comm, *store);
  const models::Split val_split = models::read_split(store_dir, o.src, o.tgt, "val");
  const models::ParallelCorpus& val = val_split.corpus;
  const std::string spm_path = o.out + "/spm.model";
  LOOM_CHECK(std::filesystem::exists(spm_path), "train: the vocabulary '{}' is missing", spm_path);
  models::Vocabulary vocab(spm_path);
  const int64_t fitting = models::count_fitting(store->lengths(), o.t.max_len);
  fmt::print("train: {} sentence pairs ({} -> {}, store '{}'), validation {}\n", store->size(), o.src, o.tgt, store_dir,
             val.src.size());
  LOOM_CHECK(fitting > 0, "train: --max-len {} drops all {} pairs of the train split (store '{}')", o.t.max_len,
             store->size(), store_dir);
  if (fitting < store->size())
    fmt::print("train: dropped {} of {} pairs longer than --max-len {} pieces\n", store->size() - fitting,
               store->size(), o.t.max_len);
  const int64_t total_steps = estimated_steps(o, *store, comm.world_size());
  std::unique_ptr<models::Trainer> trainer =
      start_trainer(o, comm.world_size(), vocab.size(), store,
                    models::keep_fitting(models::encode(vocab, val), val_split, o.t.max_len));
  if (!trainer) return 0;
  trainer->model().set_mixed_precision(o.precision == "mixed");
  print_setup(o, *trainer, comm);
  // Only rank 0 shows the run and writes metrics.jsonl; every rank stops on a signal.
  std::optional<TrainingMonitor> monitor;
  models::TrainerHooks hooks;
  if (main_rank) {
    monitor.emplace(trainer->model(), monitor_options(o, total_steps, trainer->config()));
    hooks = monitoring_hooks(*monitor);
  } else {
    hooks.stop = &stop_flag();
  }
  poison_for_tests(hooks, *trainer);
  std::vector<std::vector<int64_t>> val_sources;
  if (o.best_by == "bleu" && main_rank) {
    val_sources = validation_sources(vocab, val, trainer->config().max_len);
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
  cmd->add_option("--data", o->data,
                  "a corpus store (`loom data prepare`), or a folder with train.<lang>[.gz] and val.<lang>[.gz], "
                  "prepared into <out>/corpus first (a resumed run: the run's)");
  cmd->add_option("--resume", o->resume,
                  "continue the run in this folder from its training state, bit for bit (its --out)");
  cmd->add_option("--out", o->out, "folder for spm.model, model.safetensors and the training state")
      ->capture_default_str();
  add_fields(*cmd, *o, train_fields());
  add_fields(*cmd, o->t, models::TrainerOptions::fields());
  add_threads_option(*cmd, o->threads);
  add_device_option(*cmd, o->device);
  add_progress_option(*cmd, o->progress);
  cmd->add_option("--communicator", o->communicator,
                  "how ranks exchange gradients: auto (mpi under mpirun, else one process), mpi, or nccl (each rank "
                  "on its own GPU, --device cuda; the ranks still come from mpirun)")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "self", "mpi", "nccl"}));
  cmd->add_option("--collective-timeout", o->collective_timeout,
                  "data-parallel runs: a collective that has waited this many minutes for the other ranks ends the "
                  "job, naming itself (a rank stopped or out of step); 0: no limit [default: LOOM_COLLECTIVE_TIMEOUT "
                  "in seconds where set, else 30]")
      ->check(CLI::Validator(
          [](std::string& text) -> std::string {
            char* end = nullptr;
            const double minutes = std::strtod(text.c_str(), &end);
            if (end != text.c_str() && *end == '\0' && std::isfinite(minutes) && minutes >= 0) return "";
            return "give minutes >= 0 (0: no limit), not '" + text + "'";
          },
          "MINUTES"));
  cmd->callback([o, cmd, &exit_code] {
    // Under mpirun (see docs/training-at-scale.md) each process is a rank; else "self".
    const std::unique_ptr<dist::Communicator> comm = dist::make_communicator(o->communicator);
    if (o->collective_timeout >= 0) comm->set_timeout(o->collective_timeout * 60);
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
