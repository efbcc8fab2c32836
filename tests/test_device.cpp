// The stand-in device (loom/standin.h): memory that only kernels may touch, the
// CPU kernels under its own name. A whole training step there must give the
// CPU's losses bit for bit: proof that every op reaches memory through the
// kernel table and the Backend, which is what a real GPU backend needs.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "helpers.h"
#include "loom/backend.h"
#include "loom/gradcheck.h"
#include "loom/kernel_table.h"
#include "loom/models.h"
#include "loom/ops.h"
#include "loom/optim.h"
#include "loom/standin.h"

using namespace loom;
using namespace loom::models;

#define CHECK_ERROR(expr, text) CHECK_THROWS_WITH_AS(expr, doctest::Contains(text), Error)

namespace {
const Device kStandin = Device::standin(0);

// Three steps of the paper's recipe (Adam, Noam, dropout, label smoothing) on a
// tiny Transformer built with one seed and moved to `device`: the losses, the
// first step's gradients and, at the end, every parameter, back on the host.
struct Run {
  std::vector<double> losses;
  std::vector<std::vector<float>> first_grads, params;
};
Run train_tiny(Device device) {
  enable_standin_device();
  const int64_t vocab = 17, batch = 4, len = 6;
  TransformerConfig config = presets::tiny(vocab);
  config.d_model = 32;
  config.d_ff = 64;
  Generator init(7), data(8);
  Generator& dropout_stream = default_generator();
  dropout_stream = Generator(9);
  Transformer model(config, init);
  model.to(device);
  optim::Adam adam(model.parameters(), {.lr = 0, .betas = {0.9, 0.98}, .eps = 1e-9});
  optim::Noam noam(adam, config.d_model, /*warmup=*/4, /*factor=*/1.0);
  Run run;
  for (int step = 0; step < 3; ++step) {
    auto draw = [&] {
      Tensor r = rand({batch, len}, {DType::f64}, data, 3, vocab);
      return to_dtype(r, DType::i64).to(device);  // ids from 3: no padding, no special tokens
    };
    Tensor src = draw(), tgt_in = draw(), tgt_out = draw();
    Tensor logits = model(src, tgt_in);
    Tensor loss =
        label_smoothed_cross_entropy(logits.reshape({batch * len, vocab}), tgt_out.reshape({batch * len}), 0.1);
    adam.zero_grad();
    loss.backward();
    if (step == 0)
      for (const Tensor& p : model.parameters()) run.first_grads.push_back(p.grad().to(kCPU).to_vector<float>());
    optim::clip_grad_norm(model.parameters(), 1.0);
    noam.step();
    adam.step();
    run.losses.push_back(loss.to(kCPU).item<double>());
  }
  for (const Tensor& p : model.parameters()) {
    CHECK(p.device() == device);
    run.params.push_back(p.to(kCPU).to_vector<float>());
  }
  return run;
}

float largest_gradient(const Run& run) {
  float largest = 0;
  for (const auto& g : run.first_grads)
    for (float v : g) largest = std::max(largest, std::abs(v));
  return largest;
}

// Which parameters' gradients are rounding noise: the key projections' biases
// (softmax ignores what is added to every score of a row) get about 1e-9.
std::vector<bool> noise_only_gradients(const Run& run) {
  const float largest = largest_gradient(run);
  std::vector<bool> noise;
  for (const auto& g : run.first_grads) {
    float size = 0;
    for (float v : g) size = std::max(size, std::abs(v));
    noise.push_back(size <= 1e-6f * largest);
  }
  return noise;
}
// One key bias per attention block: encoder self, decoder self and cross attention.
const int64_t kKeyBiases = [] {
  const TransformerConfig c = presets::tiny(17);
  return c.encoder_layers + 2 * c.decoder_layers;
}();
}  // namespace

TEST_CASE("a tiny Transformer trains on the stand-in device with the CPU's losses, bit for bit") {
  Run cpu = train_tiny(kCPU);
  Run standin = train_tiny(kStandin);
  REQUIRE(cpu.losses.size() == 3);
  CHECK(std::isfinite(cpu.losses[0]));
  CHECK(cpu.losses[2] != cpu.losses[0]);  // it trained
  const std::vector<bool> noise = noise_only_gradients(cpu);
  CHECK(std::count(noise.begin(), noise.end(), true) == kKeyBiases);  // what the GPU test leaves out
  for (size_t i = 0; i < cpu.losses.size(); ++i) {
    INFO("step ", i);
    CHECK(cpu.losses[i] == standin.losses[i]);
  }
  REQUIRE(cpu.params.size() == standin.params.size());
  for (size_t p = 0; p < cpu.params.size(); ++p) {
    INFO("parameter ", p);
    CHECK(cpu.params[p] == standin.params[p]);
  }
}

// Compiled everywhere; runs where a GPU is present (ctest's device_gpu entry
// reports it as skipped otherwise). Tolerance chosen before any GPU run: cuBLAS
// and the CUDA exp/erf round differently from OpenBLAS and the CPU's vector
// math, so float32 losses agree to about 1e-6 relative per step, not bit for bit.
TEST_CASE("on a GPU: a tiny Transformer trains on cuda:0 with the CPU's losses within float32 tolerance") {
  if (!has_backend(DeviceType::cuda) || backend(DeviceType::cuda).device_count() == 0) {
    fmt::print("cuda: no device, 1 row skipped (the tiny Transformer on cuda:0 against the CPU)\n");
    return;
  }
  Run cpu = train_tiny(kCPU);
  Run gpu = train_tiny(Device::cuda(0));
  REQUIRE(gpu.losses.size() == cpu.losses.size());
  for (size_t i = 0; i < cpu.losses.size(); ++i) {
    INFO("step ", i, ": cpu ", cpu.losses[i], ", cuda ", gpu.losses[i]);
    CHECK(std::abs(cpu.losses[i] - gpu.losses[i]) <= 1e-4 * std::abs(cpu.losses[i]));
  }
  // The first step's gradients (the same parameters on both): within 1e-4 of the largest.
  REQUIRE(cpu.first_grads.size() == gpu.first_grads.size());
  const float largest = largest_gradient(cpu);
  for (size_t p = 0; p < cpu.first_grads.size(); ++p)
    for (size_t k = 0; k < cpu.first_grads[p].size(); ++k) {
      INFO("gradient of parameter ", p, " element ", k);
      CHECK(std::abs(cpu.first_grads[p][k] - gpu.first_grads[p][k]) <= 1e-4f * largest);
    }
  // The parameters after three Adam steps, but for those whose gradient is noise:
  // Adam's normalised step makes full steps of it, of different signs on the two
  // devices (seen on an H100: 0.04 apart).
  REQUIRE(cpu.params.size() == gpu.params.size());
  const std::vector<bool> noise = noise_only_gradients(cpu);
  for (size_t p = 0; p < cpu.params.size(); ++p)
    for (size_t k = 0; k < cpu.params[p].size() && !noise[p]; ++k) {
      INFO("parameter ", p, " element ", k);
      CHECK(std::abs(cpu.params[p][k] - gpu.params[p][k]) <= 1e-3f);
    }
}

TEST_CASE("every CPU kernel is registered for the stand-in device too") {
  enable_standin_device();
  size_t cpu_kernels = 0;
  for (const KernelKey& k : registered_kernels()) {
    if (k.device != DeviceType::cpu) continue;
    ++cpu_kernels;
    INFO(k.op, " ", dtype_name(k.dtype));
    CHECK(supports(k.op, kStandin, k.dtype));
    CHECK(has_reference_kernel(k.op, kStandin, k.dtype) == k.has_reference);
  }
  CHECK(cpu_kernels > 100);
}

TEST_CASE("anomaly mode names the op that made a NaN on the stand-in device") {
  enable_standin_device();
  AnomalyGuard anomaly;
  Tensor x = from_vector<float>({1.0f, -1.0f}, {2}, {f32, kStandin});
  x.requires_grad_();
  CHECK_ERROR(log(x), "anomaly: log produced NaN or Inf in its forward output");
  Tensor y = sqrt(x * 0.0);  // 0: finite forward, infinite derivative
  CHECK_ERROR(y.sum().backward(), "anomaly: the backward of sqrt produced NaN or Inf");
}

TEST_CASE("gradcheck perturbs inputs on their own device") {
  enable_standin_device();
  Tensor x = from_vector<double>({0.5, -1.2, 2.0}, {3}, {f64, kStandin});
  x.requires_grad_();
  CheckResult r =
      gradcheck([](const std::vector<Tensor>& in) { return std::vector<Tensor>{tanh(in[0] * in[0])}; }, {x});
  INFO(r.message);
  CHECK(r.passed);
  CHECK(r.max_abs_error < 1e-8);
  // And it can fail there: a wrong derivative is caught.
  auto wrong = [](const std::vector<Tensor>& in) {
    Tensor out = mul(in[0].detach(), in[0].detach());
    return std::vector<Tensor>{
        record("wrong_square", {in[0]}, out, [](BackwardContext&, const Tensor& g) -> std::vector<Tensor> {
          return {g};  // should be 2 x g
        })};
  };
  CHECK_FALSE(gradcheck(wrong, {x}).passed);
}

TEST_CASE("host code may not read stand-in memory; copies and fills go through its Backend") {
  enable_standin_device();
  Tensor t = zeros({2, 2}, {f32, kStandin});
  CHECK_ERROR(t.data<float>(), "memory of standin:0 touched outside a kernel");
  fill_(t, 3.0);
  CHECK(t.to(kCPU).to_vector<float>() == std::vector<float>(4, 3.0f));
  CHECK_ERROR(t.to_vector<float>(), "to_vector: tensor is on standin:0; copy it to the cpu first");
}

namespace {
// A tiny Transformer's losses over four steps: the first eager (Adam's state exists
// before a capture), then three either eager or replays of forward and backward captured
// once (loom/capture.h), each replay drawing dropout from where the eager step would;
// Adam runs eagerly after each (its step count changes, so it is not captured).
std::vector<double> captured_losses(Device device, bool captured_steps) {
  enable_standin_device();
  const int64_t vocab = 17, batch = 4, len = 6;
  const TransformerConfig config = presets::tiny(vocab);
  Generator data(8), init(7);  // init: the model's weights, then its dropout stream
  auto draw = [&] { return to_dtype(rand({batch, len}, {DType::f64}, data, 3, vocab), DType::i64).to(device); };
  const Tensor src = draw(), tgt_in = draw(), tgt_out = draw();
  Transformer model(config, init);
  model.to(device);
  optim::Adam adam(model.parameters(), {.lr = 1e-3, .betas = {0.9, 0.98}, .eps = 1e-9});
  Tensor loss;
  auto forward_backward = [&] {
    loss = label_smoothed_cross_entropy(model(src, tgt_in), tgt_out, 0.1, config.pad_id);
    adam.zero_grad();
    loss.backward();
    optim::clip_grad_norm_on_device(model.parameters(), 1.0);
  };
  std::vector<double> losses;
  forward_backward();
  adam.step();
  losses.push_back(loss.to(kCPU).item<double>());
  std::unique_ptr<CapturedWork> graph;
  uint64_t offset = init.offset(), per_step = 0;
  if (captured_steps) {
    init.set_offset(0);  // the capture's draws relative to 0
    graph = capture(device, forward_backward);
    per_step = init.offset();
    CHECK(per_step > 0);  // it draws dropout masks
    CHECK(graph->operations() > 100);
  }
  for (int step = 0; step < 3; ++step) {
    if (graph) {
      graph->replay(offset);
      offset += per_step;
    } else {
      forward_backward();
    }
    adam.step();
    losses.push_back(loss.to(kCPU).item<double>());
  }
  return losses;
}
}  // namespace

// What a GPU's capture (a CUDA graph) requires of a training step, checked where there is
// no GPU: the stand-in records the captured step's calls (same memory) and replays them.
TEST_CASE("a captured training step replays the eager steps' losses bit for bit on the stand-in, new masks each time") {
  const std::vector<double> eager = captured_losses(kStandin, false), replayed = captured_losses(kStandin, true);
  CHECK(eager == replayed);
  CHECK(eager[1] != eager[2]);
  CHECK(eager[2] != eager[3]);
  // What breaks a capture is named.
  Tensor on_device = ones({2}, {DType::f32, kStandin});
  CHECK_ERROR(capture(kStandin, [&] { (void)sum(on_device).to(kCPU).item<double>(); }),
              "while capturing work on standin:0");
  CHECK_ERROR(capture(kCPU, [] {}), "needs a GPU");
  CHECK(!capturing(kStandin));
  // A replay writes the memory the capture used; that memory is the capture's until it is gone.
  const AllocatorStats before = allocator(kStandin).stats();
  {
    std::unique_ptr<CapturedWork> doubled_squares =
        capture(kStandin, [&] { copy_(on_device, mul(on_device, add(on_device, on_device))); });
    CHECK(on_device.to(kCPU).to_vector<float>() == std::vector<float>{1, 1});  // captured, not run
    doubled_squares->replay(0);
    doubled_squares->replay(0);
    CHECK(on_device.to(kCPU).to_vector<float>() == std::vector<float>{8, 8});  // 1 -> 2 -> 8
  }
  CHECK(allocator(kStandin).stats().bytes_in_use == before.bytes_in_use);
}

// loom/capture.h on a GPU: the stand-in's test above, on cuda:0, with a CUDA graph. The
// same kernels on the same memory; tolerance chosen before any GPU run: 1e-6 relative
// (a replay that reused the capture's dropout masks would be off by far more).
TEST_CASE("on a GPU: a captured step (CUDA graph) replays the eager steps' losses with new dropout masks") {
  if (!has_backend(DeviceType::cuda) || backend(DeviceType::cuda).device_count() == 0) {
    fmt::print("cuda: no device, 1 row skipped (a captured step on cuda:0 against eager steps)\n");
    return;
  }
  const std::vector<double> eager = captured_losses(Device::cuda(0), false),
                            replayed = captured_losses(Device::cuda(0), true);
  REQUIRE(eager.size() == replayed.size());
  for (size_t i = 0; i < eager.size(); ++i) {
    INFO("step ", i, ": eager ", eager[i], ", replayed ", replayed[i]);
    CHECK(std::abs(eager[i] - replayed[i]) <= 1e-6 * std::abs(eager[i]));
  }
}
