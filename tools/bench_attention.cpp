// `loom bench attention`: scaled_dot_product_attention's two paths at growing lengths,
// forward + backward of one head group: the composite (matmul, softmax, dropout: keeps
// [.., T, T] tensors for backward) and flash_attention (keeps each row's log-sum-exp).
// For each: the median time and the tensor memory the call added at its peak (the
// caching allocator's high-water mark above the inputs').
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <vector>

#include "commands.h"
#include "loom/allocator.h"
#include "loom/backend.h"
#include "loom/autograd.h"
#include "loom/ops.h"
#include "loom/random.h"
#include "options.h"

namespace loom::tools {

namespace {

struct AttentionOptions {
  std::vector<int64_t> lengths = {256, 1024, 4096};
  int64_t heads = 4, depth = 64, repeats = 3;
  int threads = 2;
};

struct Measured {
  double median_ms, peak_mib;
};

// Forward + backward of `attention` on fresh q, k, v [1, heads, T, depth] (float32, causal).
template <typename Attention>
Measured measure(const AttentionOptions& o, int64_t length, Attention attention) {
  Generator gen(1);
  const Shape shape{1, o.heads, length, o.depth};
  Tensor q = randn(shape, {DType::f32}, gen).requires_grad_(), k = randn(shape, {DType::f32}, gen).requires_grad_();
  Tensor v = randn(shape, {DType::f32}, gen).requires_grad_(), g = randn(shape, {DType::f32}, gen);
  const Tensor mask = causal_mask(length);
  std::vector<double> times;
  double peak = 0;
  for (int64_t r = -1; r < o.repeats; ++r) {  // call -1 warms up, untimed
    for (const Tensor* t : {&q, &k, &v}) t->set_grad(Tensor());
    allocator(kCPU).reset_peak();
    const double before = static_cast<double>(allocator(kCPU).stats().bytes_in_use);
    const auto start = std::chrono::steady_clock::now();
    sum(mul(attention(q, k, v, mask), g)).backward();
    if (r < 0) continue;
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    peak = std::max(peak, static_cast<double>(allocator(kCPU).stats().peak_bytes_in_use) - before);
  }
  std::sort(times.begin(), times.end());
  return {times[times.size() / 2] * 1e3, peak / (1024.0 * 1024.0)};
}

void run_bench_attention(const AttentionOptions& o) {
  use_threads(o.threads);
  fmt::print("loom bench attention: 1 x {} heads x T x {}, float32, causal mask, forward + backward, {} threads\n",
             o.heads, o.depth, o.threads);
  fmt::print("{:>6} {:>14} {:>14} {:>14} {:>14}\n", "T", "composite ms", "composite MiB", "fused ms", "fused MiB");
  for (int64_t length : o.lengths) {
    const Measured composite =
        measure(o, length, [](const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask) {
          Tensor weights;  // asking for the weights takes the composite whatever the size
          return scaled_dot_product_attention(q, k, v, mask, 0.0, false, default_generator(), &weights);
        });
    const Measured fused =
        measure(o, length, [](const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask) {
          return flash_attention(q, k, v, mask);
        });
    fmt::print("{:>6} {:>14.1f} {:>14.1f} {:>14.1f} {:>14.1f}\n", length, composite.median_ms, composite.peak_mib,
               fused.median_ms, fused.peak_mib);
  }
}

}  // namespace

void add_bench_attention_command(CLI::App& bench) {
  auto* cmd = bench.add_subcommand("attention",
                                   "scaled_dot_product_attention's composite against flash_attention: time and the "
                                   "tensor memory a forward + backward adds, at growing lengths");
  auto opt = std::make_shared<AttentionOptions>();
  cmd->add_option("--lengths", opt->lengths, "sequence lengths T")->capture_default_str()->check(at_least(1));
  cmd->add_option("--heads", opt->heads, "heads (the batch is 1)")->capture_default_str()->check(at_least(1));
  cmd->add_option("--depth", opt->depth, "features per head")->capture_default_str()->check(at_least(1));
  cmd->add_option("--repeats", opt->repeats, "timed calls per path and length (the median)")
      ->capture_default_str()
      ->check(at_least(1));
  add_threads_option(*cmd, opt->threads);
  cmd->callback([opt] { run_bench_attention(*opt); });
}

}  // namespace loom::tools
