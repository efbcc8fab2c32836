// `loom train`: a Transformer on a parallel corpus, the paper's recipe (Adam
// 0.9/0.98/1e-9, the Noam schedule, label smoothing 0.1, dropout), with a joint
// SentencePiece vocabulary trained on the first run. Writes <out>/spm.model and
// <out>/model.safetensors (configuration and progress in its metadata) after
// every epoch; `loom translate --model <out>` reads them.
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "commands.h"
#include "options.h"
#include "loom/backend.h"
#include "loom/models.h"
#include "loom/ops.h"
#include "loom/optim.h"

namespace loom::tools {

namespace {

// Far above any rate that trains (the paper's factor is 1; 2 is common), low
// enough that a typo of a few digits is caught before a run is spent on it.
constexpr double kMaxLrFactor = 1e6;

struct TrainOptions {
  std::string data, src = "de", tgt = "en", out = "runs/multi30k-de-en", preset = "small";
  int64_t vocab = 8000, max_tokens = 4096, max_len = 128, warmup = 4000, epochs = 10, max_steps = 0, log_every = 100;
  double lr_factor = 1.0, dropout = -1, label_smoothing = 0.1;
  int threads = 2;
  uint64_t seed = 1;
  std::string device = "cpu";
};

// <dir>/<split>.<lang>, or the same with .gz.
std::string corpus_file(const std::string& dir, const std::string& split, const std::string& lang) {
  const std::string plain = dir + "/" + split + "." + lang;
  if (std::filesystem::exists(plain)) return plain;
  LOOM_CHECK(std::filesystem::exists(plain + ".gz"), "train: no corpus file '{}' or '{}.gz'", plain, plain);
  return plain + ".gz";
}

struct Split {
  std::string name, src_path, tgt_path;
  models::ParallelCorpus corpus;
};

// Both sides of a split, refused when empty or all blank: SentencePiece and the
// validation loss (0 / 0) gave messages that named neither the split nor the file.
Split read_split(const TrainOptions& o, const std::string& name) {
  Split s{name, corpus_file(o.data, name, o.src), corpus_file(o.data, name, o.tgt), {}};
  s.corpus = models::read_parallel(s.src_path, s.tgt_path);
  auto check = [&](const std::vector<std::string>& lines, const std::string& path) {
    LOOM_CHECK(!lines.empty(), "train: the {} split '{}' is empty", name, path);
    LOOM_CHECK(!std::all_of(lines.begin(), lines.end(), models::is_blank),
               "train: the {} split '{}' has {} lines, all blank", name, path, lines.size());
  };
  check(s.corpus.src, s.src_path);
  check(s.corpus.tgt, s.tgt_path);
  return s;
}

std::vector<models::EncodedPair> encode(const models::Vocabulary& vocab, const models::ParallelCorpus& corpus) {
  std::vector<models::EncodedPair> pairs(corpus.src.size());
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < pairs.size(); ++i) pairs[i] = {vocab.encode(corpus.src[i]), vocab.encode(corpus.tgt[i])};
  return pairs;
}

// Mean label-smoothed loss per target token over the batches (eval mode, no graph).
double evaluate(models::Transformer& model, const std::vector<models::Batch>& batches, double smoothing,
                Device device) {
  NoGradGuard no_grad;
  model.eval();
  double total = 0, tokens = 0;
  for (const auto& host_batch : batches) {
    const models::Batch b = to_device(host_batch, device);
    total += label_smoothed_cross_entropy(model(b.src, b.tgt_in), b.tgt_out, smoothing, models::Vocabulary::kPad)
                 .to(kCPU).item<double>() * static_cast<double>(b.tgt_tokens);
    tokens += static_cast<double>(b.tgt_tokens);
  }
  model.train();
  return total / tokens;
}

// The pairs of a split that fit --max-len; says how many were dropped, and refuses a split left empty.
std::vector<models::EncodedPair> keep_fitting(std::vector<models::EncodedPair> pairs, const Split& split,
                                              int64_t max_len) {
  const size_t total = pairs.size();
  std::erase_if(pairs, [&](const models::EncodedPair& p) { return !models::fits(p, max_len); });
  const size_t dropped = total - pairs.size();
  LOOM_CHECK(!pairs.empty(), "train: --max-len {} drops all {} pairs of the {} split ('{}', '{}')", max_len, total,
             split.name, split.src_path, split.tgt_path);
  if (dropped)
    fmt::print("{}: dropped {} of {} pairs longer than --max-len {} pieces\n", split.name, dropped, total, max_len);
  return pairs;
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

void run_train(const TrainOptions& o) {
  LOOM_CHECK(o.max_tokens > o.max_len, "train: --max-tokens {} must exceed --max-len {} (a batch holds a sentence)",
             o.max_tokens, o.max_len);
  use_threads(o.threads);
  const Device device = parse_device(o.device);
  prepare_out(o.out);
  const std::string spm_prefix = o.out + "/spm", spm_path = spm_prefix + ".model";
  const std::string checkpoint = o.out + "/model.safetensors";
  const Split train_split = read_split(o, "train"), val_split = read_split(o, "val");
  const models::ParallelCorpus &train = train_split.corpus, &val = val_split.corpus;
  fmt::print("train: {} sentence pairs ({} -> {}), validation {}\n", train.src.size(), o.src, o.tgt, val.src.size());
  if (!std::filesystem::exists(spm_path)) {
    auto t0 = std::chrono::steady_clock::now();
    std::vector<std::string> both = train.src;
    both.insert(both.end(), train.tgt.begin(), train.tgt.end());
    models::Vocabulary::train(both, spm_prefix, o.vocab);
    fmt::print("vocabulary: trained a joint SentencePiece model of {} pieces in {:.1f} s -> {}\n", o.vocab,
               std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), spm_path);
  }
  models::Vocabulary vocab(spm_path);
  const std::vector<models::EncodedPair> train_pairs = keep_fitting(encode(vocab, train), train_split, o.max_len),
                                         val_pairs = keep_fitting(encode(vocab, val), val_split, o.max_len);

  models::TransformerConfig config = models::presets::by_name(o.preset, vocab.size());
  config.pad_id = models::Vocabulary::kPad;
  config.max_len = std::max(config.max_len, o.max_len + 1);
  if (o.dropout >= 0) config.dropout = o.dropout;
  // One stream initializes the weights and then draws the dropout masks; another shuffles: both fixed by the seed.
  Generator gen(o.seed), shuffle(o.seed + 1);
  models::Transformer model(config, gen);
  model.to(device);
  optim::Adam adam(model.parameters(), {.lr = 0, .betas = {0.9, 0.98}, .eps = 1e-9});
  optim::Noam noam(adam, config.d_model, o.warmup, o.lr_factor);
  fmt::print("model: '{}' preset, {} parameters, d_model {}, {}+{} layers, dropout {}; {} threads\n", o.preset,
             model.parameter_count(), config.d_model, config.encoder_layers, config.decoder_layers, config.dropout,
             o.threads);
  std::vector<models::Batch> val_batches = make_batches(val_pairs, o.max_tokens, o.max_len, shuffle);

  const std::vector<Tensor> params = model.parameters();
  // A diverged run stops before it reaches the checkpoint: the last good one stays.
  std::string last_saved = fmt::format("'{}' is left as it was", checkpoint);
  auto diverged = [&](const std::string& what, int64_t step, double value, double lr) {
    fail("train: {} is {} at step {} (learning rate {:.3g}); stopped without saving: {}", what, value, step, lr,
         last_saved);
  };
  int64_t step = 0;
  for (int64_t epoch = 1; epoch <= o.epochs; ++epoch) {
    std::vector<models::Batch> batches = make_batches(train_pairs, o.max_tokens, o.max_len, shuffle);
    auto window_start = std::chrono::steady_clock::now();
    double window_loss = 0, window_tokens = 0;
    for (const models::Batch& host_batch : batches) {
      const models::Batch b = to_device(host_batch, device);
      Tensor loss = label_smoothed_cross_entropy(model(b.src, b.tgt_in), b.tgt_out, o.label_smoothing,
                                                 models::Vocabulary::kPad);
      adam.zero_grad();
      loss.backward();
      const bool log = (step + 1) % o.log_every == 0;
      const double norm = log ? optim::grad_norm(params) : 0.0;  // a pass over every gradient: only when printed
      const double lr = noam.step();
      const double loss_value = loss.to(kCPU).item<double>();
      if (!std::isfinite(loss_value)) diverged("the training loss", step + 1, loss_value, lr);
      adam.step();
      ++step;
      window_loss += loss_value * static_cast<double>(b.tgt_tokens);
      window_tokens += static_cast<double>(b.tgt_tokens);
      if (log) {
        const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - window_start).count();
        const AllocatorStats memory = allocator(kCPU).stats();
        fmt::print("step {:6d}  epoch {:3d}  loss {:.4f}  lr {:.2e}  grad-norm {:.3f}  {:.0f} target tokens/s  "
                   "memory: peak {:.0f} MiB, cached {:.0f} MiB\n",
                   step, epoch, window_loss / window_tokens, lr, norm, window_tokens / seconds,
                   memory.peak_bytes_in_use / 1048576.0, memory.bytes_cached / 1048576.0);
        std::fflush(stdout);
        window_loss = window_tokens = 0;
        window_start = std::chrono::steady_clock::now();
      }
      if (o.max_steps > 0 && step >= o.max_steps) break;
    }
    const double val_loss = evaluate(model, val_batches, o.label_smoothing, device);
    if (!std::isfinite(val_loss)) diverged("the validation loss", step, val_loss, noam.rate(noam.current_step()));
    nn::save(model, checkpoint,
             {{"config", config.to_json()}, {"vocabulary", "spm.model"}, {"step", std::to_string(step)},
              {"epoch", std::to_string(epoch)}, {"val_loss", fmt::format("{:.6f}", val_loss)}});
    last_saved = fmt::format("'{}' keeps epoch {}, step {}", checkpoint, epoch, step);
    fmt::print("epoch {:3d} done: step {}, validation loss {:.4f}; saved {}\n", epoch, step, val_loss, checkpoint);
    std::fflush(stdout);
    if (o.max_steps > 0 && step >= o.max_steps) break;
  }
}

}  // namespace

void add_train_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("train", "train a Transformer on a parallel corpus (Multi30k layout)");
  auto o = std::make_shared<TrainOptions>();
  cmd->add_option("--data", o->data, "folder with train.<lang>[.gz] and val.<lang>[.gz]")->required();
  cmd->add_option("--src", o->src, "source language suffix")->capture_default_str();
  cmd->add_option("--tgt", o->tgt, "target language suffix")->capture_default_str();
  cmd->add_option("--out", o->out, "folder for spm.model and model.safetensors")->capture_default_str();
  cmd->add_option("--preset", o->preset, "tiny, small, base or big")->capture_default_str();
  cmd->add_option("--vocab", o->vocab, "SentencePiece pieces (first run)")
      ->capture_default_str()
      ->check(in_range(5, models::TransformerConfig::kMaxVocab));
  cmd->add_option("--max-tokens", o->max_tokens, "padded tokens per batch")->capture_default_str()->check(at_least(2));
  cmd->add_option("--max-len", o->max_len, "longest sentence kept, in pieces")
      ->capture_default_str()
      ->check(in_range(1, models::TransformerConfig::kMaxLen - 1));
  cmd->add_option("--epochs", o->epochs, "passes over the corpus")->capture_default_str()->check(at_least(1));
  cmd->add_option("--max-steps", o->max_steps, "stop after this many updates (0: no limit)")
      ->capture_default_str()
      ->check(at_least(0));
  cmd->add_option("--warmup", o->warmup, "Noam warm-up steps")->capture_default_str()->check(at_least(1));
  cmd->add_option("--lr-factor", o->lr_factor, "Noam factor")->capture_default_str()->check(in_range(0, kMaxLrFactor));
  cmd->add_option("--dropout", o->dropout, "dropout (default: the preset's)")->check(in_range(0, 1, true));
  cmd->add_option("--label-smoothing", o->label_smoothing, "label smoothing")
      ->capture_default_str()
      ->check(in_range(0, 1, true));
  add_threads_option(*cmd, o->threads);
  add_device_option(*cmd, o->device);
  cmd->add_option("--seed", o->seed, "initialization, shuffling and dropout seed")->capture_default_str();
  cmd->add_option("--log-every", o->log_every, "steps between progress lines")->capture_default_str()->check(at_least(1));
  cmd->callback([o] { run_train(*o); });
}

}  // namespace loom::tools
