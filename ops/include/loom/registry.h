#pragma once
// The op registry: one registration per op gives the whole test matrix
// (gradcheck, gradgradcheck, non-contiguous and broadcast variants, fused vs
// composed, fast vs reference kernel), run by tests/ and `loom gradcheck`, and
// the op's benchmark cases, timed by `loom bench ops`.
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "loom/random.h"
#include "loom/tensor.h"

namespace loom {

using OpArgs = std::vector<Tensor>;
using OpCall = std::function<Tensor(const OpArgs&)>;

// Where sample values are drawn. Non-smooth ops declare their kinks this way so
// finite differences never straddle one.
enum class Domain {
  any,             // uniform in [-2, 2]
  positive,        // uniform in [0.5, 2] (log, sqrt, pow with fractional exponents)
  away_from_zero,  // |x| in [0.25, 2], random sign (relu, abs: kink at 0)
  unit,            // uniform in [-0.9, 0.9] (atanh-like domains)
};

struct InputSpec {
  Shape shape;
  Domain domain = Domain::any;
  // Integer inputs (indices) are drawn uniformly from [0, high) and never differentiated;
  // bool inputs (masks, conditions) likewise with high = 2: {b8_shape, Domain::any, DType::b8, 2, false}.
  DType dtype = DType::f64;
  int64_t high = 0;
  // A floating input that is not differentiated (e.g. a mask).
  bool differentiable = true;
};

struct Sample {
  std::vector<InputSpec> inputs;
  // How to call the op on this sample (attributes such as dims live here);
  // empty means the op's default call.
  OpCall call;
  std::string label;  // shown in reports, e.g. "dims={1} keepdim"
  // The composition of a fused op for this sample's attributes (else OpInfo::composed).
  OpCall composed;
};

// ---- Benchmark cases: the op on the Transformer's real shapes (float32, CPU) ----

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
  OpCall call;        // empty: the op's default call
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
// An elementwise activation (relu, gelu) on the FFN's hidden layer, n = 1536 x 2048.
inline BenchCase ffn_activation(const std::string& op) {
  const double n = rows * 2048.0;
  return {.label = op + " 1536x2048",
          .inputs = {{{rows, 2048}}},
          .forward_work = 2 * n * f32_bytes,
          .backward_work = 3 * n * f32_bytes,
          .formula = "fwd 4*2n; bwd 4*3n (read G, x; write dx)"};
}
}  // namespace bench

struct OpInfo {
  std::string name;
  // What `loom explain` prints, in plain text: the forward, the derivative (g is
  // dL/dy arriving at the output; for a backward op, v is what arrives at its own
  // output) and the shape rule. Every registered op has all three (test_registry).
  std::string formula;
  std::string derivative;
  std::string shape_rule;
  OpCall call;                  // default call: the op applied to the sample's inputs
  std::vector<Sample> samples;
  OpCall composed;              // a fused op's composition from simpler ops, if any
  bool differentiable = true;   // false: forward-only checks
  bool gradgrad = true;         // run gradgradcheck (false only with a stated reason)
  bool variants = true;         // run non-contiguous and broadcast variants
  std::string note;             // e.g. why gradgrad is off
  std::vector<BenchCase> bench;  // timed by `loom bench ops`; none for ops off the training path
};

// A benchmark case ready to run (inputs drawn from a fixed seed), as `loom bench ops` times it:
// forward = the op on the leaves with grad mode on (the graph is recorded, then dropped);
// backward = grad({out}, leaves, {G}, retain_graph) on one forward recorded by the first
// call, G a fixed random tensor of out's shape (1 for a 0-d loss). Empty if not timed.
struct BenchRun {
  std::function<void()> forward;
  std::function<void()> backward;
};
BenchRun prepare_bench(const OpInfo& op, const BenchCase& c);

// Shorthands for the common sample shapes.
inline Sample unary_sample(Shape shape, Domain domain = Domain::any, std::string label = "") {
  return {{{std::move(shape), domain}}, {}, std::move(label)};
}
inline Sample binary_sample(Shape a, Shape b, Domain domain = Domain::any, std::string label = "") {
  return {{{std::move(a), domain}, {std::move(b), domain}}, {}, std::move(label)};
}

void register_op(OpInfo info);
const std::vector<OpInfo>& registered_ops();
const OpInfo* find_op(const std::string& name);

struct Registrar {
  Registrar(OpInfo info) { register_op(std::move(info)); }
};

// LOOM_OP(exp){ .name = "exp", .formula = "y = eˣ", .derivative = "dx = g·y", .shape_rule = "y has x's shape",
//               .call = ..., .samples = {...} };
// At the start of a line, in namespace loom: ops/CMakeLists.txt lists every one
// in a generated file that refers to it, so a static link keeps them all.
#define LOOM_OP(id)                                  \
  extern const ::loom::Registrar loom_op_##id;       \
  const ::loom::Registrar loom_op_##id = ::loom::OpInfo

namespace detail {
// The number of LOOM_OP lines in ops/'s sources when it was built (generated):
// a test compares it with registered_ops().size().
int registrations_in_sources();
}  // namespace detail

}  // namespace loom
