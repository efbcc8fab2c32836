#pragma once
// Benchmark cases: an op on the Transformer's real shapes (float32, CPU), timed by
// `loom bench ops` against PyTorch (bench/torch_ops.py times the same cases by
// label). They live in ops/bench, apart from the ops, and register with LOOM_BENCH.
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "loom/registry.h"

namespace loom {

// One input of a benchmark case. A floating input is a standard-normal leaf that
// requires grad (the timed backward differentiates it); an int64 input holds ids
// drawn uniformly from [0, high); `make` builds any other fixed input (a causal
// mask, targets with ignored rows) once, outside the timed calls.
struct BenchInput {
  Shape shape;
  DType dtype = DType::f32;
  int64_t high = 0;
  std::function<Tensor(Generator&)> make;
};

// Products report GFLOP/s; memory-bound ops GB/s over their minimal traffic
// (inputs read + outputs written once).
enum class BenchUnit { flops, bytes };

// A product C[m, n] = op(A) op(B), `batch` times: the harness times raw
// cblas_sgemm on the same shape beside the op.
struct GemmShape {
  int64_t batch = 1, m = 0, n = 0, k = 0;
  bool transpose_a = false, transpose_b = false;
};

struct BenchCase {
  std::string label;  // the case's name: bench/torch_ops.py times the same case under it (the join key)
  std::vector<BenchInput> inputs;
  OpCall call;  // empty: the op's default call
  BenchUnit unit = BenchUnit::bytes;
  double forward_work = 0, backward_work = 0;  // flops or bytes per call
  std::string formula;                         // how the work is counted (in the JSON)
  bool time_backward = true;
  std::optional<GemmShape> gemm;
};

// The shapes the cases use (bench/torch_ops.py has the same): 64 sentences x 24
// tokens, d_model 512 and 256, d_ff 4 x d_model, 8 heads, vocabulary 8000.
namespace bench {
inline constexpr int64_t sentences = 64, tokens = 24, rows = sentences * tokens, heads = 8, vocab = 8000;
inline constexpr double f32_bytes = 4, id_bytes = 8;  // a float32 element; an int64 id or target
// Ids uniform in [low, high), int64.
Tensor random_ids(const Shape& shape, int64_t low, int64_t high, Generator& gen);
}  // namespace bench

// A benchmark case ready to run (inputs drawn from a fixed seed), as `loom bench ops` times it:
// forward = the op on the leaves with grad mode on (the graph is recorded, then dropped);
// backward = grad({out}, leaves, {G}, retain_graph) on one forward recorded by the first
// call, G a fixed random tensor of out's shape (1 for a 0-d loss). Empty if not timed.
struct BenchRun {
  std::function<void()> forward;
  std::function<void()> backward;
};
BenchRun prepare_bench(const OpInfo& op, const BenchCase& c);

// An op's cases, registered from ops/bench (the op may register before or after).
struct BenchRegistration {
  std::string op;  // the registered op the cases call (by default through its OpInfo::call)
  std::vector<BenchCase> cases;
};
void register_bench(BenchRegistration registration);
// The cases registered for `op` (none for ops off the training path).
const std::vector<BenchCase>& bench_cases(const std::string& op);
// Every registration, in op-name order: a test checks each names a registered op.
const std::vector<BenchRegistration>& registered_bench();

struct BenchRegistrar {
  BenchRegistrar(BenchRegistration registration) { register_bench(std::move(registration)); }
};

// LOOM_BENCH(matmul){.op = "matmul", .cases = transformer_products()};
// At the start of a line, in namespace loom (listed by ops/CMakeLists.txt, as LOOM_OP).
#define LOOM_BENCH(id)                                 \
  extern const ::loom::BenchRegistrar loom_bench_##id; \
  const ::loom::BenchRegistrar loom_bench_##id = ::loom::BenchRegistration

}  // namespace loom
