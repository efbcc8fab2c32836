// `loom bench ops`: times loom's ops (float32, CPU) on the Transformer's real
// shapes, next to raw OpenBLAS sgemm and the machine's measured memory
// bandwidth, all in the same run. bench/torch_ops.py times the same cases in
// PyTorch and bench/ops.sh joins the two tables.
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
// Rates: matmul cases report GFLOP/s with 2*M*N*K flops per product (forward one
// product, backward two: dA and dB). Memory-bound cases report GB/s over the
// minimal traffic, bytes = inputs read + outputs written once (float32 = 4 B,
// int64 ids/targets = 8 B, bool mask = 1 B), not counting write-allocate reads
// (the STREAM convention, so they compare with the triad below). Each case
// states its formula in the JSON ("bytes"). Bandwidth: a STREAM-like triad
// a[i] = b[i] + s*c[i] (and a copy) over three 256 MiB float arrays, OpenMP,
// same threads; "% bw" = achieved GB/s / triad GB/s. Inputs of 3-12 MiB fit in
// this machine's last-level cache, so a memory-bound op can exceed 100%.
#include <cblas.h>
#include <omp.h>

#if __has_include("loom/ops/elementwise.h")
#include "loom/ops/elementwise.h"  // gelu (another branch adds it)
#endif

#include <fmt/core.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "commands.h"
#include "loom/atomic_file.h"
#include "options.h"
#include "loom/ops.h"

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

// gelu lands from another branch: found by argument-dependent lookup when declared.
template <typename T>
concept HasGelu = requires(const T& x) { gelu(x); };
template <typename T>
T call_gelu(const T& x) {
  return gelu(x);
}

struct Case;
template <typename T>
void add_gelu_case(std::vector<Case>& cases);

struct Prepared {
  std::function<void()> forward;
  std::function<void()> backward;  // empty: no backward for this case
};

struct Case {
  std::string name;    // the join key with bench/torch_ops.py
  std::string kind;    // "gemm" (GFLOP/s) or "memory" (GB/s)
  double fwd_work = 0;  // flops (gemm) or bytes (memory)
  double bwd_work = 0;
  std::string formula;  // how fwd_work / bwd_work are counted
  std::function<Prepared()> prepare;
  // gemm cases: makes the same product(s) as a call straight to OpenBLAS (lazily: its matrices
  // are allocated only when the case runs)
  std::function<std::function<void()>()> raw_sgemm;
};

Generator& bench_gen() {
  static Generator gen(1234);
  return gen;
}
Tensor randn_f32(const Shape& shape) { return randn(shape, {}, bench_gen()); }
Tensor leaf(const Shape& shape) {
  Tensor t = randn_f32(shape);
  t.requires_grad_();
  return t;
}

// forward(): builds the output from the leaves; backward times loom::grad.
Prepared autograd_case(std::function<Tensor()> forward, std::vector<Tensor> inputs) {
  Prepared p;
  p.forward = [forward] { (void)forward(); };
  auto out = std::make_shared<Tensor>();
  auto seed = std::make_shared<Tensor>();
  p.backward = [forward, inputs, out, seed] {
    if (!out->defined()) {  // first call (a warm-up): record the graph once
      *out = forward();
      *seed = out->dim() == 0 ? ones({}) : randn_f32(out->shape());
    }
    (void)grad({*out}, inputs, {*seed}, /*retain_graph=*/true);
  };
  return p;
}

double gemm_flops(double m, double n, double k) { return 2.0 * m * n * k; }

std::string dims(std::initializer_list<int64_t> d) {
  std::string s;
  for (int64_t v : d) s += (s.empty() ? "" : "x") + std::to_string(v);
  return s;
}

// A row-major [rows, cols] float matrix for raw sgemm.
std::shared_ptr<std::vector<float>> raw_matrix(int64_t rows, int64_t cols) {
  Tensor t = randn_f32({rows, cols});
  auto v = std::make_shared<std::vector<float>>(t.to_vector<float>());
  return v;
}

// C[M,N] = op(A) op(B): ta -> A stored [K,M]; tb -> B stored [N,K].
std::function<void()> raw_gemm(int64_t m, int64_t n, int64_t k, bool ta, bool tb, int64_t batch = 1) {
  auto a = raw_matrix(batch * (ta ? k : m), ta ? m : k);
  auto b = raw_matrix(batch * (tb ? n : k), tb ? k : n);
  auto c = std::make_shared<std::vector<float>>(static_cast<size_t>(batch * m * n));
  return [=] {
    auto one = [&](int64_t i) {
      cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n, k, 1.0f,
                  a->data() + i * m * k, ta ? m : k, b->data() + i * k * n, tb ? k : n, 0.0f,
                  c->data() + i * m * n, n);
    };
    if (batch == 1) {
      one(0);  // OpenBLAS's own threading
    } else {
#pragma omp parallel for schedule(static)
      for (int64_t i = 0; i < batch; ++i) one(i);  // one single-threaded gemm per batch item
    }
  };
}

// A 2-D product in one of three layouts: NN a@b, TN a^T@b (weight gradients),
// NT a@b^T (Linear with a [out, in] weight).
Case matmul_case(int64_t m, int64_t k, int64_t n, bool ta, bool tb) {
  std::string a = ta ? fmt::format("({})^T", dims({k, m})) : dims({m, k});
  std::string b = tb ? fmt::format("({})^T", dims({n, k})) : dims({k, n});
  Case c;
  c.name = fmt::format("matmul {} @ {}", a, b);
  c.kind = "gemm";
  c.fwd_work = gemm_flops(m, n, k);
  c.bwd_work = 2 * gemm_flops(m, n, k);
  c.formula = "fwd 2MNK, bwd 4MNK flops";
  c.prepare = [=] {
    Tensor A = leaf(ta ? Shape{k, m} : Shape{m, k});
    Tensor B = leaf(tb ? Shape{n, k} : Shape{k, n});
    return autograd_case([=] { return matmul(ta ? A.t() : A, tb ? B.t() : B); }, {A, B});
  };
  return c;
}

// Batched [batch, m, k] @ [batch, k, n] (tb: b stored [batch, n, k], as q @ k^T).
Case bmm_case(int64_t batch, int64_t m, int64_t k, int64_t n, bool tb) {
  Case c;
  std::string b = tb ? fmt::format("({})^T", dims({batch, n, k})) : dims({batch, k, n});
  c.name = fmt::format("bmm {} @ {}", dims({batch, m, k}), b);
  c.kind = "gemm";
  c.fwd_work = batch * gemm_flops(m, n, k);
  c.bwd_work = 2 * batch * gemm_flops(m, n, k);
  c.formula = "fwd 2*B*MNK, bwd 4*B*MNK flops";
  c.prepare = [=] {
    Tensor A = leaf({batch, m, k});
    Tensor B = leaf(tb ? Shape{batch, n, k} : Shape{batch, k, n});
    return autograd_case([=] { return matmul(A, tb ? B.transpose(-1, -2) : B); }, {A, B});
  };
  return c;
}

Case memory_case(std::string name, double fwd_bytes, double bwd_bytes, std::string formula,
                 std::function<Prepared()> prepare) {
  Case c;
  c.name = std::move(name);
  c.kind = "memory";
  c.fwd_work = fwd_bytes;
  c.bwd_work = bwd_bytes;
  c.formula = std::move(formula);
  c.prepare = std::move(prepare);
  return c;
}

// gelu [1536, 2048] (the FFN's hidden activation), when this build has gelu.
template <typename T>
void add_gelu_case(std::vector<Case>& cases) {
  if constexpr (HasGelu<T>) {
    constexpr int64_t N = 64 * 24;
    double h = N * 2048.0;
    cases.push_back(memory_case("gelu 1536x2048", 2 * h * 4, 3 * h * 4, "fwd 4*2n; bwd 4*3n (read G, x; write dx)", [] {
      T x = leaf({N, 2048});
      return autograd_case([=] { return call_gelu(x); }, {x});
    }));
  }
}

std::vector<Case> all_cases() {
  constexpr int64_t N = 64 * 24, V = 8000, H = 8, B = 64, T = 24;
  constexpr double F4 = 4, I8 = 8;  // bytes of float32 and of an int64 id
  std::vector<Case> cases;

  // ---- matmul: the Transformer's products, d_model 512 then 256 ----
  for (int64_t d : {512, 256}) {
    int64_t ff = 4 * d;
    std::vector<std::pair<int64_t, int64_t>> kn = {{d, d}, {d, ff}, {ff, d}, {d, V}};
    // k = k, n = n below: clang cannot capture structured bindings in a function with OpenMP.
    for (auto [k, n] : kn) {
      Case c = matmul_case(N, k, n, false, false);
      c.raw_sgemm = [=, k = k, n = n] { return raw_gemm(N, n, k, false, false); };
      cases.push_back(std::move(c));
    }
    if (d != 512) continue;
    // weight gradients x^T @ g: [k, N]^T @ [N, n]
    for (auto [k, n] : kn) {
      Case c = matmul_case(k, N, n, true, false);
      c.raw_sgemm = [=, k = k, n = n] { return raw_gemm(k, n, N, true, false); };
      cases.push_back(std::move(c));
    }
    // Linear with an [out, in] weight: x @ W^T
    for (auto [k, n] : kn) {
      Case c = matmul_case(N, k, n, false, true);
      c.raw_sgemm = [=, k = k, n = n] { return raw_gemm(N, n, k, false, true); };
      cases.push_back(std::move(c));
    }
  }
  // ---- attention products, 8 heads: head dim 64 (d_model 512) and 32 (256) ----
  for (int64_t dk : {64, 32}) {
    if (dk == 64) {
      Case c = bmm_case(B * H, T, dk, T, false);  // q @ k^T with k^T contiguous
      c.raw_sgemm = [=] { return raw_gemm(T, T, dk, false, false, B * H); };
      cases.push_back(std::move(c));
    }
    Case s = bmm_case(B * H, T, dk, T, true);  // q @ k.transpose(-1, -2)
    s.raw_sgemm = [=] { return raw_gemm(T, T, dk, false, true, B * H); };
    cases.push_back(std::move(s));
    Case w = bmm_case(B * H, T, T, dk, false);  // weights @ v
    w.raw_sgemm = [=] { return raw_gemm(T, dk, T, false, false, B * H); };
    cases.push_back(std::move(w));
  }

  // ---- elementwise ----
  {
    double n = N * 512.0;
    cases.push_back(memory_case("add 1536x512 + 1536x512", 3 * n * F4, 0,
                                "fwd 4*(2n + n); bwd passes G through (no traffic counted)", [] {
                                  Tensor a = leaf({N, 512}), b = leaf({N, 512});
                                  return autograd_case([=] { return add(a, b); }, {a, b});
                                }));
    for (int64_t c : {512, 2048}) {
      double nc = N * static_cast<double>(c);
      cases.push_back(memory_case(fmt::format("add {} + {} (row broadcast)", dims({N, c}), c), (2 * nc + c) * F4,
                                  (nc + c) * F4, "fwd 4*(2n + C); bwd 4*(n + C) (da = G, dbias = row sum of G)",
                                  [c] {
                                    Tensor a = leaf({N, c}), b = leaf({c});
                                    return autograd_case([=] { return add(a, b); }, {a, b});
                                  }));
    }
    cases.push_back(memory_case("mul 1536x512 * 1536x512", 3 * n * F4, 5 * n * F4,
                                "fwd 4*3n; bwd 4*5n (read G, a, b; write da, db)", [] {
                                  Tensor a = leaf({N, 512}), b = leaf({N, 512});
                                  return autograd_case([=] { return mul(a, b); }, {a, b});
                                }));
    double h = N * 2048.0;
    cases.push_back(memory_case("relu 1536x2048", 2 * h * F4, 3 * h * F4, "fwd 4*2n; bwd 4*3n (read G, x; write dx)",
                                [] {
                                  Tensor x = leaf({N, 2048});
                                  return autograd_case([=] { return relu(x); }, {x});
                                }));
    add_gelu_case<Tensor>(cases);
    cases.push_back(memory_case("sum 1536x512 over last dim", (n + N) * F4, (n + N) * F4,
                                "fwd 4*(n + rows); bwd 4*(rows + n) (G expanded to x's shape)", [] {
                                  Tensor x = leaf({N, 512});
                                  return autograd_case([=] { return sum(x, {-1}); }, {x});
                                }));
  }
  // ---- softmax family ----
  {
    double n = static_cast<double>(B * H * T * T);
    for (bool log : {false, true}) {
      std::string op = log ? "log_softmax" : "softmax";
      cases.push_back(memory_case(fmt::format("{} 64x8x24x24 causal mask", op), 2 * n * F4 + T * T,
                                  3 * n * F4, "fwd 4*2n + T*T mask bytes; bwd 4*3n (read y, G; write dx)",
                                  [log] {
                                    Tensor x = leaf({B, H, T, T});
                                    Tensor mask = causal_mask(T);
                                    return autograd_case(
                                        [=] { return log ? log_softmax(x, -1, mask) : softmax(x, -1, mask); }, {x});
                                  }));
    }
    double v = static_cast<double>(N) * V;
    for (bool log : {false, true}) {
      std::string op = log ? "log_softmax" : "softmax";
      cases.push_back(memory_case(fmt::format("{} 1536x8000", op), 2 * v * F4, 3 * v * F4,
                                  "fwd 4*2n; bwd 4*3n (read y, G; write dx)", [log] {
                                    Tensor x = leaf({N, V});
                                    return autograd_case([=] { return log ? log_softmax(x, -1) : softmax(x, -1); },
                                                         {x});
                                  }));
    }
  }
  // ---- layer norm (with weight and bias) ----
  for (int64_t d : {512, 256}) {
    double n = static_cast<double>(N) * d;
    cases.push_back(memory_case(fmt::format("layer_norm {}", dims({N, d})), (2 * n + 2 * d) * F4,
                                (3 * n + 3 * d) * F4,
                                "fwd 4*(2n + 2D) (x, w, b -> y); bwd 4*(3n + 3D) (x, G, w -> dx, dw, db)", [d] {
                                  Tensor x = leaf({N, d}), w = leaf({d}), b = leaf({d});
                                  return autograd_case([=] { return layer_norm(x, w, b); }, {x, w, b});
                                }));
  }
  // ---- dropout (mask generation included) ----
  {
    double n = N * 2048.0;
    cases.push_back(memory_case("dropout p=0.1 1536x2048", 2 * n * F4 + n / 8, 2 * n * F4 + n / 8,
                                "fwd 4*2n + n/8; bwd 4*2n + n/8 (loom writes then reads an n/8-byte bitmask; "
                                "torch moves an n-byte mask)",
                                [] {
                                  Tensor x = leaf({N, 2048});
                                  return autograd_case([=] { return dropout(x, 0.1, true, bench_gen()); }, {x});
                                }));
  }
  // ---- label-smoothed cross-entropy (smoothing 0.1, ignore_index 0, every 10th target ignored) ----
  {
    double n = static_cast<double>(N) * V;
    cases.push_back(memory_case("cross_entropy 1536x8000 ls=0.1 ignore", n * F4 + N * I8, 2 * n * F4 + N * I8,
                                "fwd 4n + 8*rows (logits, targets -> scalar); bwd 4*2n + 8*rows (-> dlogits)", [] {
                                  Tensor logits = leaf({N, V});
                                  std::vector<int64_t> ids(N);
                                  Tensor u = rand({N}, {}, bench_gen(), 1, V);
                                  auto uv = u.to_vector<float>();
                                  for (int64_t i = 0; i < N; ++i) ids[i] = i % 10 == 9 ? 0 : static_cast<int64_t>(uv[i]);
                                  Tensor target = from_vector(ids, {N}, {.dtype = DType::i64});
                                  return autograd_case(
                                      [=] { return label_smoothed_cross_entropy(logits, target, 0.1, 0); }, {logits});
                                }));
  }
  // ---- embedding ----
  {
    constexpr int64_t D = 512;
    double rows = static_cast<double>(N) * D;
    cases.push_back(memory_case("embedding 8000x512 [64x24 ids]", N * I8 + 2 * rows * F4,
                                N * I8 + rows * F4 + static_cast<double>(V) * D * F4,
                                "fwd 8*ids + 4*2*ids*D (ids, rows read -> rows written); bwd 8*ids + 4*ids*D + "
                                "4*V*D (G, ids -> the dense [V, D] table)",
                                [] {
                                  Tensor w = leaf({V, D});
                                  Tensor u = rand({B, T}, {}, bench_gen(), 0, V);
                                  auto uv = u.to_vector<float>();
                                  std::vector<int64_t> ids(uv.begin(), uv.end());
                                  Tensor idt = from_vector(ids, {B, T}, {.dtype = DType::i64});
                                  return autograd_case([=] { return embedding(w, idt); }, {w});
                                }));
  }
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
  std::vector<Case> cases = all_cases();
  if (opt.list) {
    for (const auto& c : cases) fmt::print("{}\n", c.name);
    return;
  }
  const char* coretype = std::getenv("OPENBLAS_CORETYPE");
  fmt::print("loom bench ops: float32, CPU\n");
  fmt::print("OPENBLAS_CORETYPE={} (OpenBLAS core: {})\n", coretype ? coretype : "(unset)", openblas_get_corename());
  fmt::print("threads: {} (omp_get_max_threads {}), {:g} s per case and direction, median after warm-up\n",
             opt.threads, omp_get_max_threads(), opt.seconds);
  if constexpr (!HasGelu<Tensor>) fmt::print("gelu: not in this build's ops (skipped)\n");
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
  for (Case& c : cases) {
    if (!opt.filter.empty() && c.name.find(opt.filter) == std::string::npos) continue;
    Prepared p = c.prepare();
    Timing fwd = time_call(p.forward, opt.seconds);
    Timing bwd = p.backward ? time_call(p.backward, opt.seconds) : Timing{};
    p = {};  // frees the recorded graph before the raw gemm runs
    Timing raw = c.raw_sgemm ? time_call(c.raw_sgemm(), opt.seconds) : Timing{};
    const bool gemm = c.kind == "gemm";
    auto rate = [&](double work, double s) -> std::string {
      if (work <= 0 || s <= 0) return "-";
      return fmt::format("{:.1f}{}", work / s / 1e9, gemm ? "GF" : "GB");
    };
    auto pct = [&](double work, double s) -> std::string {
      if (gemm || work <= 0 || s <= 0) return "-";
      return fmt::format("{:.0f}%", 100.0 * work / s / 1e9 / bw.triad_gbps);
    };
    fmt::print("{:<44} {:>10} {:>10} {:>9} {:>9} {:>6} {:>6} {:>10} {:>7}\n", c.name, ms(fwd.median_s),
               ms(bwd.median_s), rate(c.fwd_work, fwd.median_s), rate(c.bwd_work, bwd.median_s),
               pct(c.fwd_work, fwd.median_s), pct(c.bwd_work, bwd.median_s), ms(raw.median_s),
               raw.reps ? fmt::format("{:.2f}", fwd.median_s / raw.median_s) : "-");
    std::fflush(stdout);
    nlohmann::json j = {{"name", c.name},       {"kind", c.kind},         {"fwd_s", fwd.median_s},
                        {"fwd_min_s", fwd.min_s}, {"fwd_reps", fwd.reps},   {"bwd_s", bwd.median_s},
                        {"bwd_min_s", bwd.min_s}, {"bwd_reps", bwd.reps},   {"formula", c.formula}};
    j[gemm ? "fwd_flops" : "fwd_bytes"] = c.fwd_work;
    j[gemm ? "bwd_flops" : "bwd_bytes"] = c.bwd_work;
    if (raw.reps) {
      j["sgemm_s"] = raw.median_s;
      j["sgemm_min_s"] = raw.min_s;
    }
    out["cases"].push_back(std::move(j));
  }
  fmt::print("\nrate: GF = GFLOP/s (2MNK per product; bwd = dA + dB), GB = GB/s of minimal traffic "
             "(inputs read + outputs written); mm/sg = loom matmul fwd / raw cblas_sgemm\n");
  if (!opt.json.empty()) {
    write_file(opt.json, out.dump(2) + "\n");
    fmt::print("wrote {}\n", opt.json);
  }
}

}  // namespace

void add_bench_command(CLI::App& app, int& exit_code) {
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
  (void)exit_code;
}

}  // namespace loom::tools
