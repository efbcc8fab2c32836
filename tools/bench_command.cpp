// `loom bench ops`: the harness that times every registered op's benchmark
// cases (OpInfo::bench, float32, CPU, on the Transformer's real shapes: the cases,
// their inputs and work formulas live in the op files' registrations), next to
// raw OpenBLAS sgemm for products and the machine's measured memory bandwidth,
// all in the same run. bench/torch_ops.py times the same cases in PyTorch by
// label and bench/ops.sh joins the two tables.
//
// Timing (the same in bench/torch_ops.py): per case and direction, warm-up calls
// (at least one, then until 20% of --seconds is spent), then timed calls until
// --seconds is spent and at least 3 were made; the reported time is the median.
//
// forward  = the op called on inputs that require grad, with grad mode on (as in
//            training: the graph node is recorded; the output and graph are
//            dropped after each call).
// backward = loom::grad({out}, inputs, {G}, retain_graph=true) on one recorded
//            forward, with G a fixed random tensor of out's shape (a 0-d 1 for
//            the loss). That is the backward of the scalar (out * G).sum()
//            without the mul/sum nodes, timing only the backward call. PyTorch:
//            torch.autograd.grad(out, inputs, G, retain_graph=True). Neither
//            touches .grad, so no accumulation is timed.
//
// Inputs (prepare_bench, ops/registry/bench_run.cpp): floating inputs are standard-normal
// leaves that require grad, drawn from one fixed seed, the same whatever --filter keeps.
//
// Rates: matmul cases report GFLOP/s with 2*M*N*K flops per product (forward one
// product, backward two: dA and dB). Memory-bound cases report GB/s over the
// minimal traffic, bytes = inputs read + outputs written once (float32 = 4 B,
// int64 ids/targets = 8 B, bool mask = 1 B), not counting write-allocate reads
// (the STREAM convention, so they compare with the triad below). Each case
// states its formula in the JSON ("formula"). Bandwidth: a STREAM-like triad
// a[i] = b[i] + s*c[i] (and a copy) over three 256 MiB float arrays, OpenMP,
// same threads; "% bw" = achieved GB/s / triad GB/s. Inputs of 3-12 MiB fit in
// this machine's last-level cache, so a memory-bound op can exceed 100%.
#include <cblas.h>
#include <omp.h>

#include <fmt/core.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "commands.h"
#include "loom/atomic_file.h"
#include "loom/ops.h"
#include "loom/bench_case.h"
#include "options.h"

namespace loom::tools {

namespace {

using Clock = std::chrono::steady_clock;

struct Timing {
  double median_s = 0;
  double min_s = 0;  // in the JSON: median/min far above 1 means the machine was busy
  int reps = 0;
};

// Median after warm-up; see the top of the file.
Timing time_call(const std::function<void()>& f, double seconds, int min_reps = 3) {
  auto since = [](Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); };
  auto warm = Clock::now();
  do f();
  while (since(warm) < 0.2 * seconds);
  std::vector<double> times;
  auto start = Clock::now();
  while (static_cast<int>(times.size()) < min_reps || (since(start) < seconds && times.size() < 100000)) {
    auto t0 = Clock::now();
    f();
    times.push_back(since(t0));
  }
  std::sort(times.begin(), times.end());
  size_t n = times.size();
  double median = n % 2 ? times[n / 2] : 0.5 * (times[n / 2 - 1] + times[n / 2]);
  return {median, times.front(), static_cast<int>(n)};
}

// A product as one call straight to OpenBLAS: C[m,n] = op(A) op(B), with A stored
// [k,m] when transposed and B stored [n,k]; a batch runs one single-threaded sgemm
// per item in an OpenMP loop. Its matrices are allocated when the case runs.
std::function<void()> raw_sgemm(const GemmShape& g) {
  Generator gen(1234);
  auto matrix = [&](int64_t rows, int64_t cols) {
    return std::make_shared<std::vector<float>>(randn({g.batch * rows, cols}, {}, gen).to_vector<float>());
  };
  const bool ta = g.transpose_a, tb = g.transpose_b;
  const int64_t m = g.m, n = g.n, k = g.k, batch = g.batch;
  auto a = ta ? matrix(k, m) : matrix(m, k);
  auto b = tb ? matrix(n, k) : matrix(k, n);
  auto c = std::make_shared<std::vector<float>>(static_cast<size_t>(batch * m * n));
  return [=] {
    auto one = [&](int64_t i) {
      cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n, k, 1.0f,
                  a->data() + i * m * k, ta ? m : k, b->data() + i * k * n, tb ? k : n, 0.0f, c->data() + i * m * n, n);
    };
    if (batch == 1) {
      one(0);  // OpenBLAS's own threading
    } else {
#pragma omp parallel for schedule(static)
      for (int64_t i = 0; i < batch; ++i) one(i);
    }
  };
}

// Every registered op's benchmark cases: products first, then memory-bound ops
// (bench/join.py prints them as two blocks), each in the registry's op order.
std::vector<std::pair<const OpInfo*, const BenchCase*>> registered_cases() {
  std::vector<std::pair<const OpInfo*, const BenchCase*>> cases;
  for (const OpInfo& op : registered_ops())
    for (const BenchCase& c : bench_cases(op.name)) cases.emplace_back(&op, &c);
  std::stable_partition(cases.begin(), cases.end(), [](const auto& e) { return e.second->unit == BenchUnit::flops; });
  return cases;
}

struct Bandwidth {
  double copy_gbps = 0, triad_gbps = 0;
};

// STREAM-like copy and triad over three 256 MiB arrays (first touch in parallel).
Bandwidth measure_bandwidth(double seconds) {
  const int64_t n = int64_t(256) << 18;  // 64 Mi floats = 256 MiB per array
  float* a = static_cast<float*>(std::aligned_alloc(64, n * sizeof(float)));
  float* b = static_cast<float*>(std::aligned_alloc(64, n * sizeof(float)));
  float* c = static_cast<float*>(std::aligned_alloc(64, n * sizeof(float)));
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    a[i] = 0.0f;
    b[i] = 1.0f;
    c[i] = 2.0f;
  }
  const float s = 3.0f;
  Timing copy = time_call(
      [&] {
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < n; ++i) a[i] = b[i];
      },
      seconds);
  Timing triad = time_call(
      [&] {
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < n; ++i) a[i] = b[i] + s * c[i];
      },
      seconds);
  volatile float sink = a[n / 2];
  (void)sink;
  std::free(a);
  std::free(b);
  std::free(c);
  return {2.0 * n * sizeof(float) / copy.median_s / 1e9, 3.0 * n * sizeof(float) / triad.median_s / 1e9};
}

struct Options {
  int threads = 2;
  double seconds = 0.3;
  std::string filter;
  std::string json;
  bool list = false;
};

std::string ms(double s) { return s > 0 ? fmt::format("{:.3f}", s * 1e3) : "-"; }

void run_bench_ops(const Options& opt) {
  use_threads(opt.threads);
  auto cases = registered_cases();
  std::erase_if(cases, [&](const auto& e) { return e.second->label.find(opt.filter) == std::string::npos; });
  LOOM_CHECK(!cases.empty(), "bench ops: no case matches --filter '{}' (`loom bench ops --list` lists them)",
             opt.filter);
  if (opt.list) {
    for (const auto& [op, c] : cases) fmt::print("{}\n", c->label);
    return;
  }
  const char* coretype = std::getenv("OPENBLAS_CORETYPE");
  fmt::print("loom bench ops: float32, CPU\n");
  fmt::print("OPENBLAS_CORETYPE={} (OpenBLAS core: {})\n", coretype ? coretype : "(unset)", openblas_get_corename());
  fmt::print("threads: {} (omp_get_max_threads {}), {:g} s per case and direction, median after warm-up\n", opt.threads,
             omp_get_max_threads(), opt.seconds);
  Bandwidth bw = measure_bandwidth(std::max(opt.seconds, 0.2));
  fmt::print("memory bandwidth (3 x 256 MiB arrays): copy {:.1f} GB/s, triad {:.1f} GB/s (\"% bw\" uses triad)\n\n",
             bw.copy_gbps, bw.triad_gbps);

  nlohmann::json out;
  out["tool"] = "loom";
  out["threads"] = opt.threads;
  out["seconds"] = opt.seconds;
  out["openblas_coretype"] = coretype ? coretype : "";
  out["openblas_corename"] = openblas_get_corename();
  out["bandwidth"] = {{"copy_GBps", bw.copy_gbps}, {"triad_GBps", bw.triad_gbps}};
  out["cases"] = nlohmann::json::array();

  fmt::print("{:<44} {:>10} {:>10} {:>9} {:>9} {:>6} {:>6} {:>10} {:>7}\n", "case", "fwd ms", "bwd ms", "fwd rate",
             "bwd rate", "fwd%bw", "bwd%bw", "sgemm ms", "mm/sg");
  for (const auto& [op, c] : cases) {
    BenchRun run = prepare_bench(*op, *c);
    Timing fwd = time_call(run.forward, opt.seconds);
    Timing bwd = run.backward ? time_call(run.backward, opt.seconds) : Timing{};
    run = {};  // frees the inputs and the recorded graph before the raw gemm runs
    Timing raw = c->gemm ? time_call(raw_sgemm(*c->gemm), opt.seconds) : Timing{};
    const bool gemm = c->unit == BenchUnit::flops;
    auto rate = [&](double work, double s) -> std::string {
      if (work <= 0 || s <= 0) return "-";
      return fmt::format("{:.1f}{}", work / s / 1e9, gemm ? "GF" : "GB");
    };
    auto pct = [&](double work, double s) -> std::string {
      if (gemm || work <= 0 || s <= 0) return "-";
      return fmt::format("{:.0f}%", 100.0 * work / s / 1e9 / bw.triad_gbps);
    };
    fmt::print("{:<44} {:>10} {:>10} {:>9} {:>9} {:>6} {:>6} {:>10} {:>7}\n", c->label, ms(fwd.median_s),
               ms(bwd.median_s), rate(c->forward_work, fwd.median_s), rate(c->backward_work, bwd.median_s),
               pct(c->forward_work, fwd.median_s), pct(c->backward_work, bwd.median_s), ms(raw.median_s),
               raw.reps ? fmt::format("{:.2f}", fwd.median_s / raw.median_s) : "-");
    std::fflush(stdout);
    nlohmann::json j = {{"name", c->label},       {"kind", gemm ? "gemm" : "memory"},
                        {"fwd_s", fwd.median_s},  {"fwd_min_s", fwd.min_s},
                        {"fwd_reps", fwd.reps},   {"bwd_s", bwd.median_s},
                        {"bwd_min_s", bwd.min_s}, {"bwd_reps", bwd.reps},
                        {"formula", c->formula}};
    j[gemm ? "fwd_flops" : "fwd_bytes"] = c->forward_work;
    j[gemm ? "bwd_flops" : "bwd_bytes"] = c->backward_work;
    if (raw.reps) {
      j["sgemm_s"] = raw.median_s;
      j["sgemm_min_s"] = raw.min_s;
    }
    out["cases"].push_back(std::move(j));
  }
  fmt::print(
      "\nrate: GF = GFLOP/s (2MNK per product; bwd = dA + dB), GB = GB/s of minimal traffic "
      "(inputs read + outputs written); mm/sg = loom matmul fwd / raw cblas_sgemm\n");
  if (!opt.json.empty()) {
    write_file(opt.json, out.dump(2) + "\n");
    fmt::print("wrote {}\n", opt.json);
  }
}

}  // namespace

void add_bench_command(CLI::App& app) {
  auto* bench = app.add_subcommand("bench", "micro-benchmarks");
  bench->require_subcommand(1);
  auto* ops = bench->add_subcommand("ops", "time ops on the Transformer's shapes (vs raw sgemm and memory bandwidth)");
  auto opt = std::make_shared<Options>();
  add_threads_option(*ops, opt->threads);
  ops->add_option("--seconds", opt->seconds, "timed seconds per case and direction")
      ->capture_default_str()
      ->check(in_range(0.001, 3600));
  ops->add_option("--filter", opt->filter, "only cases whose name contains this");
  ops->add_option("--json", opt->json, "write the results to this JSON file");
  ops->add_flag("--list", opt->list, "list the cases and exit");
  ops->callback([opt] { run_bench_ops(*opt); });
  add_bench_step_command(*bench);
  add_bench_attention_command(*bench);
}

}  // namespace loom::tools
