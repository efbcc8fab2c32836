#pragma once
// The op registry: one registration per op gives the whole test matrix
// (gradcheck, gradgradcheck, non-contiguous and broadcast variants, fused vs
// composed, fast vs reference kernel), run by tests/ and `loom gradcheck`, and
// what `loom explain` prints. Benchmark cases register apart (loom/bench_case.h).
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "loom/op_schema.h"
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
  // For an op with a schema, a sample without a call calls its invoke with the inputs,
  // these attributes by the schema's names ({"dim", Shape{1}}), and the defaults.
  std::vector<std::pair<std::string, ArgumentValue>> attributes = {};
};

struct OpInfo {
  std::string name;
  // What `loom explain` prints, in plain text: the forward, the derivative (g is
  // dL/dy arriving at the output; for a backward op, v is what arrives at its own
  // output) and the shape rule. Every registered op has all three (test_registry).
  std::string formula;
  std::string derivative;
  std::string shape_rule;
  OpCall call;  // default call: the op applied to the sample's inputs
  std::vector<Sample> samples;
  OpCall composed;             // a fused op's composition from simpler ops, if any
  bool differentiable = true;  // false: forward-only checks
  bool gradgrad = true;        // run gradgradcheck (false only with a stated reason)
  bool variants = true;        // run non-contiguous and broadcast variants
  std::string note;            // e.g. why gradgrad is off
  // torch's signature of the function of the same name (loom/op_schema.h), and the call
  // it describes: Python's loom.<name> and Tensor.<name> are made from them, and
  // test_registry calls invoke on every sample. Without one, the op is in loom.ops only.
  // A schema of tensors only ("exp(Tensor input) -> Tensor") needs no invoke: it is `call`.
  std::string schema;
  std::function<OpResult(const Arguments&)> invoke;
  std::optional<OpSchema> signature;  // schema as register_op read it
};

// Shorthands for the common sample shapes.
inline Sample unary_sample(Shape shape, Domain domain = Domain::any, std::string label = "") {
  return {{{std::move(shape), domain}}, {}, std::move(label)};
}
inline Sample binary_sample(Shape a, Shape b, Domain domain = Domain::any, std::string label = "") {
  return {{{std::move(a), domain}, {std::move(b), domain}}, {}, std::move(label)};
}

void register_op(OpInfo info);
// The call a sample makes: its own; else, for an op with a schema, its invoke with the
// sample's attributes and the defaults (several results: every element of each, flattened
// and joined, so gradcheck sees them all); else the op's default call.
OpCall sample_call(const OpInfo& op, const Sample& sample);
const std::vector<OpInfo>& registered_ops();
const OpInfo* find_op(const std::string& name);

struct Registrar {
  Registrar(OpInfo info) { register_op(std::move(info)); }
};

// LOOM_OP(exp){ .name = "exp", .formula = "y = eˣ", .derivative = "dx = g·y", .shape_rule = "y has x's shape",
//               .call = ..., .samples = {...} };
// At the start of a line, in namespace loom: ops/CMakeLists.txt lists every one
// in a generated file that refers to it, so a static link keeps them all.
#define LOOM_OP(id)                            \
  extern const ::loom::Registrar loom_op_##id; \
  const ::loom::Registrar loom_op_##id = ::loom::OpInfo

namespace detail {
// The number of LOOM_OP lines in ops/'s sources when it was built (generated):
// a test compares it with registered_ops().size().
int registrations_in_sources();
}  // namespace detail

}  // namespace loom
