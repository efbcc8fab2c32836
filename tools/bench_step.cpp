// `loom bench step`: one whole training step of the Transformer (forward, label-
// smoothed loss, backward, Adam update), timed over several steps on a fixed
// random batch. bench/step.sh runs the same model in PyTorch (bench/torch_step.py)
// with the same thread count and prints both.

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "loom/atomic_file.h"
#include "loom/backend.h"
#include "loom/capture.h"
#include "loom/kernel_profile.h"
#include "options.h"
#include "loom/models.h"
#include "loom/ops.h"
#include "loom/optim.h"

namespace loom::tools {

namespace {

struct StepOptions {
  std::string preset = "small";
  int64_t batch = 64, src_len = 24, tgt_len = 24, vocab = 8000;
  int threads = 2, steps = 10, warmup = 3;
  double dropout = 0.1;
  std::string json, device = "cpu", precision = "float32";
  double peak_tflops = 0;   // the device's peak for float32 matmuls: MFU printed when given
  bool profile = false;     // time every kernel over the timed steps (loom/kernel_profile.h)
  bool cuda_graph = false;  // capture one step after the warm-up and replay it (loom/capture.h)
};

// Matmul FLOPs of one forward pass (2 per multiply-add): projections, feed-forward,
// attention scores and values, the output layer; a training step is about 3x
// (backward: 2x). Layer norms, softmax and elementwise work are not counted (MFU's convention).
double forward_flops(const models::TransformerConfig& c, int64_t batch, int64_t src_len, int64_t tgt_len) {
  const double d = static_cast<double>(c.d_model), ff = static_cast<double>(c.d_ff);
  const double s = static_cast<double>(batch * src_len), t = static_cast<double>(batch * tgt_len);
  const double encoder = s * (8 * d * d + 4 * d * ff + 4 * static_cast<double>(src_len) * d);
  const double decoder = t * (8 * d * d + 4 * static_cast<double>(tgt_len) * d)                      // self-attention
                         + t * 4 * d * d + s * 4 * d * d + t * 4 * static_cast<double>(src_len) * d  // cross-attention
                         + t * 4 * d * ff;
  return static_cast<double>(c.encoder_layers) * encoder + static_cast<double>(c.decoder_layers) * decoder +
         t * 2 * d * static_cast<double>(c.tgt_vocab);
}

Tensor random_ids(int64_t batch, int64_t len, int64_t vocab, Generator& gen) {
  auto u = rand({batch, len}, {DType::f64}, gen).to_vector<double>();
  std::vector<int64_t> ids(u.size());
  for (size_t i = 0; i < u.size(); ++i) ids[i] = 3 + static_cast<int64_t>(u[i] * static_cast<double>(vocab - 3));
  return from_vector(ids, {batch, len}, {DType::i64});
}

void run_bench_step(const StepOptions& opt) {
  use_threads(opt.threads);
  const bool lowered = use_precision(opt.precision, opt.device);
  const std::string precision = !lowered                   ? "float32"
                                : opt.precision == "mixed" ? "mixed (bf16 activations)"
                                                           : "bf16 matmuls";
  const Device device = parse_device(opt.device);
  models::TransformerConfig config = models::presets::by_name(opt.preset, opt.vocab);
  config.dropout = opt.dropout;
  Generator init(1), data(2);
  models::Transformer model(config, init);
  model.to(device);
  model.set_mixed_precision(lowered && opt.precision == "mixed");
  optim::Adam adam(model.parameters(), {.lr = 1e-4, .betas = {0.9, 0.98}, .eps = 1e-9});
  Tensor src = random_ids(opt.batch, opt.src_len, opt.vocab, data);
  Tensor tgt_in = random_ids(opt.batch, opt.tgt_len, opt.vocab, data);
  Tensor tgt_out = random_ids(opt.batch, opt.tgt_len, opt.vocab, data).to(device);
  src = src.to(device);
  tgt_in = tgt_in.to(device);

  fmt::print(
      "loom bench step: Transformer '{}' (d_model {}, d_ff {}, heads {}, {}+{} layers, dropout {}), "
      "vocabulary {}, {} parameters\n",
      opt.preset, config.d_model, config.d_ff, config.heads, config.encoder_layers, config.decoder_layers,
      config.dropout, opt.vocab, model.parameter_count());
  fmt::print("batch {} x {} source / {} target tokens, {}, {} threads, device {}; {} warm-up + {} timed steps\n",
             opt.batch, opt.src_len, opt.tgt_len, precision, opt.threads, device, opt.warmup, opt.steps);
  std::vector<double> times;
  double loss_value = 0;
  std::optional<KernelProfile> profile;
  Tensor loss;
  auto step = [&] {
    loss = label_smoothed_cross_entropy(model(src, tgt_in), tgt_out, 0.1, config.pad_id);
    adam.zero_grad();
    loss.backward();
    KernelPhase phase("optimizer");
    adam.step();
  };
  // --cuda-graph: after the warm-up, one step captured (its dropout draws relative to
  // offset 0) and every timed step a replay from where an eager step would draw. Adam's
  // step count and learning rate are those of the captured step in every replay (the
  // bench times the work; the trainer would keep them on the device).
  std::unique_ptr<CapturedWork> captured;
  uint64_t random_offset = 0, offsets_per_step = 0;
  for (int s = 0; s < opt.warmup + opt.steps; ++s) {
    if (opt.profile && s == opt.warmup) profile.emplace(device);
    if (opt.cuda_graph && s == opt.warmup) {
      random_offset = init.offset();
      init.set_offset(0);
      captured = capture(device, step);
      offsets_per_step = init.offset();
      fmt::print("captured one step: {} operations, replayed in one launch per step\n", captured->operations());
    }
    auto t0 = std::chrono::steady_clock::now();
    if (captured) {
      captured->replay(random_offset);
      random_offset += offsets_per_step;
    } else {
      step();
    }
    loss_value = loss.to(kCPU).item<double>();  // waits for the device: the step is done
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (s >= opt.warmup) times.push_back(seconds);
  }
  std::sort(times.begin(), times.end());
  const double median = times[times.size() / 2], best = times.front();
  const double tokens = static_cast<double>(opt.batch * opt.tgt_len);
  fmt::print("step: median {:.1f} ms, min {:.1f} ms ({:.0f} target tokens/s at the median); last loss {:.4f}\n",
             median * 1e3, best * 1e3, tokens / median, loss_value);
  nlohmann::json profile_json;
  if (profile) {
    double total = 0;
    for (double t : times) total += t;
    profile_json =
        print_kernel_profile(*profile, opt.steps, total / static_cast<double>(opt.steps), "step", device, stdout);
  }
  const double step_tflops = 3 * forward_flops(config, opt.batch, opt.src_len, opt.tgt_len) / median / 1e12;
  if (opt.peak_tflops > 0)
    fmt::print("model FLOP utilization: {:.1f}% ({:.2f} TFLOP/s of a {:.1f} TFLOP/s peak)\n",
               100 * step_tflops / opt.peak_tflops, step_tflops, opt.peak_tflops);
  // Peak tensor memory (the caching allocator's high-water mark) and the process's peak RSS.
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  const double peak_rss_mb = static_cast<double>(usage.ru_maxrss) / 1024.0;  // Linux: KiB
  const double peak_tensors_mb = static_cast<double>(allocator(device).stats().peak_bytes_in_use) / (1024.0 * 1024.0);
  fmt::print("memory: peak RSS {:.0f} MB, peak tensor memory in use {:.0f} MiB\n", peak_rss_mb, peak_tensors_mb);
  if (!opt.json.empty()) {
    nlohmann::json out = {{"tool", "loom"},
                          {"preset", opt.preset},
                          {"threads", opt.threads},
                          {"precision", precision},
                          {"batch", opt.batch},
                          {"src_len", opt.src_len},
                          {"tgt_len", opt.tgt_len},
                          {"vocab", opt.vocab},
                          {"parameters", model.parameter_count()},
                          {"median_s", median},
                          {"min_s", best},
                          {"steps", opt.steps},
                          {"peak_rss_mb", peak_rss_mb},
                          {"peak_tensor_mib", peak_tensors_mb},
                          {"device", device.str()},
                          {"step_tflops", step_tflops}};
    if (profile) out["profile"] = profile_json;
    write_file(opt.json, out.dump(2) + "\n");
  }
}

}  // namespace

void add_bench_step_command(CLI::App& bench) {
  auto* step = bench.add_subcommand("step", "time whole Transformer training steps (forward, loss, backward, Adam)");
  auto opt = std::make_shared<StepOptions>();
  step->add_option("--preset", opt->preset, "tiny, small, base or big")->capture_default_str();
  step->add_option("--batch", opt->batch, "sentences per batch")->capture_default_str()->check(at_least(1));
  step->add_option("--src-len", opt->src_len, "source tokens per sentence")->capture_default_str()->check(at_least(1));
  step->add_option("--tgt-len", opt->tgt_len, "target tokens per sentence")->capture_default_str()->check(at_least(1));
  step->add_option("--vocab", opt->vocab, "vocabulary size")
      ->capture_default_str()
      ->check(in_range(5, models::TransformerConfig::kMaxVocab));
  step->add_option("--dropout", opt->dropout, "dropout probability")
      ->capture_default_str()
      ->check(in_range(0, 1, true));
  add_threads_option(*step, opt->threads);
  add_precision_option(*step, opt->precision, /*training=*/true);
  step->add_option("--steps", opt->steps, "timed steps")->capture_default_str()->check(at_least(1));
  step->add_option("--warmup", opt->warmup, "untimed steps first")->capture_default_str()->check(at_least(0));
  step->add_option("--json", opt->json, "write the results to this JSON file");
  add_device_option(*step, opt->device);
  step->add_option("--peak-tflops", opt->peak_tflops, "the device's float32 matmul peak, for MFU (0: not printed)")
      ->capture_default_str()
      ->check(at_least(0));
  step->add_flag("--profile", opt->profile,
                 "print each kernel's time per step in forward and backward, and matmul's share of the step");
  step->add_flag(
      "--cuda-graph", opt->cuda_graph,
      "capture one step after the warm-up as a CUDA graph and time its replays (a GPU; the stand-in device counts "
      "its operations)");
  step->callback([opt] {
    if (opt->cuda_graph && opt->profile)
      throw CLI::ValidationError("--cuda-graph",
                                 "cannot be combined with --profile (a profile times each kernel call)");
    if (opt->cuda_graph && opt->warmup < 1)
      throw CLI::ValidationError("--cuda-graph", "needs --warmup 1 or more (Adam's state is made before the capture)");
    if (opt->cuda_graph && opt->device == "cpu")
      throw CLI::ValidationError("--cuda-graph",
                                 "needs --device cuda (or standin: its replays count the operations "
                                 "a step launches; their times are the CPU's)");
    run_bench_step(*opt);
  });
}

}  // namespace loom::tools
