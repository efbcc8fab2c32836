// `loom train`: a Transformer on a parallel corpus, the paper's recipe (Adam
// 0.9/0.98/1e-9, the Noam schedule, label smoothing 0.1, dropout), with a joint
// SentencePiece vocabulary trained on the first run. Writes <out>/spm.model and
// <out>/model.safetensors (configuration and progress in its metadata) after
// every epoch; `loom translate --model <out>` reads them.
#include <omp.h>

#include <chrono>
#include <filesystem>

#include "commands.h"
#include "loom/backend.h"
#include "loom/models.h"
#include "loom/ops.h"
#include "loom/optim.h"

namespace loom::tools {

namespace {

struct TrainOptions {
  std::string data, src = "de", tgt = "en", out = "runs/multi30k-de-en", preset = "small";
  int64_t vocab = 8000, max_tokens = 4096, max_len = 128, warmup = 4000, epochs = 10, max_steps = 0, log_every = 100;
  double lr_factor = 1.0, dropout = -1, label_smoothing = 0.1;
  int threads = 2;
  uint64_t seed = 1;
};

// <dir>/<split>.<lang>, or the same with .gz.
std::string corpus_file(const std::string& dir, const std::string& split, const std::string& lang) {
  const std::string plain = dir + "/" + split + "." + lang;
  if (std::filesystem::exists(plain)) return plain;
  LOOM_CHECK(std::filesystem::exists(plain + ".gz"), "train: no corpus file '{}' or '{}.gz'", plain, plain);
  return plain + ".gz";
}

std::vector<models::EncodedPair> encode(const models::Vocabulary& vocab, const models::ParallelCorpus& corpus) {
  std::vector<models::EncodedPair> pairs(corpus.src.size());
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < pairs.size(); ++i) pairs[i] = {vocab.encode(corpus.src[i]), vocab.encode(corpus.tgt[i])};
  return pairs;
}

// Mean label-smoothed loss per target token over the batches (eval mode, no graph).
double evaluate(models::Transformer& model, const std::vector<models::Batch>& batches, double smoothing) {
  NoGradGuard no_grad;
  model.eval();
  double total = 0, tokens = 0;
  for (const auto& b : batches) {
    total += label_smoothed_cross_entropy(model(b.src, b.tgt_in), b.tgt_out, smoothing, models::Vocabulary::kPad)
                 .item<double>() * static_cast<double>(b.tgt_tokens);
    tokens += static_cast<double>(b.tgt_tokens);
  }
  model.train();
  return total / tokens;
}

void run_train(const TrainOptions& o) {
  use_threads(o.threads);
  std::filesystem::create_directories(o.out);
  const std::string spm_prefix = o.out + "/spm", spm_path = spm_prefix + ".model";
  auto read_split = [&](const std::string& split) {
    const std::string src = corpus_file(o.data, split, o.src), tgt = corpus_file(o.data, split, o.tgt);
    return models::read_parallel(src, tgt);
  };
  const models::ParallelCorpus train = read_split("train"), val = read_split("val");
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
  const std::vector<models::EncodedPair> train_pairs = encode(vocab, train), val_pairs = encode(vocab, val);

  models::TransformerConfig config = models::presets::by_name(o.preset, vocab.size());
  config.pad_id = models::Vocabulary::kPad;
  config.max_len = std::max(config.max_len, o.max_len + 1);
  if (o.dropout >= 0) config.dropout = o.dropout;
  // One stream initializes the weights and then draws the dropout masks; another shuffles: both fixed by the seed.
  Generator gen(o.seed), shuffle(o.seed + 1);
  models::Transformer model(config, gen);
  optim::Adam adam(model.parameters(), {.lr = 0, .betas = {0.9, 0.98}, .eps = 1e-9});
  optim::Noam noam(adam, config.d_model, o.warmup, o.lr_factor);
  fmt::print("model: '{}' preset, {} parameters, d_model {}, {}+{} layers, dropout {}; {} threads\n", o.preset,
             model.parameter_count(), config.d_model, config.encoder_layers, config.decoder_layers, config.dropout,
             o.threads);
  std::vector<models::Batch> val_batches = make_batches(val_pairs, o.max_tokens, o.max_len, shuffle);

  const std::vector<Tensor> params = model.parameters();
  int64_t step = 0;
  for (int64_t epoch = 1; epoch <= o.epochs; ++epoch) {
    std::vector<models::Batch> batches = make_batches(train_pairs, o.max_tokens, o.max_len, shuffle);
    auto window_start = std::chrono::steady_clock::now();
    double window_loss = 0, window_tokens = 0;
    for (const models::Batch& b : batches) {
      Tensor loss = label_smoothed_cross_entropy(model(b.src, b.tgt_in), b.tgt_out, o.label_smoothing,
                                                 models::Vocabulary::kPad);
      adam.zero_grad();
      loss.backward();
      const bool log = (step + 1) % o.log_every == 0;
      const double norm = log ? optim::grad_norm(params) : 0.0;  // a pass over every gradient: only when printed
      const double lr = noam.step();
      adam.step();
      ++step;
      window_loss += loss.item<double>() * static_cast<double>(b.tgt_tokens);
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
    const double val_loss = evaluate(model, val_batches, o.label_smoothing);
    nn::save(model, o.out + "/model.safetensors",
             {{"config", config.to_json()}, {"vocabulary", "spm.model"}, {"step", std::to_string(step)},
              {"epoch", std::to_string(epoch)}, {"val_loss", fmt::format("{:.6f}", val_loss)}});
    fmt::print("epoch {:3d} done: step {}, validation loss {:.4f}; saved {}/model.safetensors\n", epoch, step, val_loss,
               o.out);
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
  cmd->add_option("--vocab", o->vocab, "SentencePiece pieces (first run)")->capture_default_str();
  cmd->add_option("--max-tokens", o->max_tokens, "padded tokens per batch")->capture_default_str();
  cmd->add_option("--max-len", o->max_len, "longest sentence kept, in pieces")->capture_default_str();
  cmd->add_option("--epochs", o->epochs, "passes over the corpus")->capture_default_str();
  cmd->add_option("--max-steps", o->max_steps, "stop after this many updates (0: no limit)")->capture_default_str();
  cmd->add_option("--warmup", o->warmup, "Noam warm-up steps")->capture_default_str();
  cmd->add_option("--lr-factor", o->lr_factor, "Noam factor")->capture_default_str();
  cmd->add_option("--dropout", o->dropout, "dropout (default: the preset's)");
  cmd->add_option("--label-smoothing", o->label_smoothing, "label smoothing")->capture_default_str();
  cmd->add_option("--threads", o->threads, "OpenMP / OpenBLAS threads")->capture_default_str();
  cmd->add_option("--seed", o->seed, "initialization, shuffling and dropout seed")->capture_default_str();
  cmd->add_option("--log-every", o->log_every, "steps between progress lines")->capture_default_str();
  cmd->callback([o] { run_train(*o); });
}

}  // namespace loom::tools
