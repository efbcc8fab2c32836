// The op registry and the benchmark cases registered beside it (ops/bench).
#include "loom/registry.h"

#include <algorithm>

#include "loom/bench_case.h"
#include "loom/error.h"
#include "loom/ops.h"

namespace loom {

namespace {
std::vector<OpInfo>& ops() {
  static std::vector<OpInfo> registry;
  return registry;
}
std::vector<BenchRegistration>& benches() {
  static std::vector<BenchRegistration> registry;
  return registry;
}
}  // namespace

void register_op(OpInfo info) {
  LOOM_CHECK(!info.name.empty(), "register_op: an op needs a name");
  LOOM_CHECK(std::none_of(ops().begin(), ops().end(), [&](const OpInfo& op) { return op.name == info.name; }),
             "register_op: op '{}' is registered twice", info.name);
  LOOM_CHECK(info.call != nullptr, "register_op: op '{}' has no call", info.name);
  LOOM_CHECK(!info.samples.empty(), "register_op: op '{}' has no samples: nothing would test it", info.name);
  LOOM_CHECK(!info.schema.empty() || info.invoke == nullptr, "register_op: op '{}' has an invoke without a schema",
             info.name);
  if (!info.schema.empty()) {
    info.signature = OpSchema::parse(info.schema);
    LOOM_CHECK(info.signature->name == info.name, "register_op: op '{}' has the schema of '{}'", info.name,
               info.signature->name);
    if (!info.invoke) {
      LOOM_CHECK(info.signature->tensors_only() && !info.signature->returns_list,
                 "register_op: op '{}' needs an invoke: its schema takes more than tensors ({})", info.name,
                 info.schema);
      std::vector<std::string> names;
      for (const Parameter& p : info.signature->parameters) names.push_back(p.name);
      info.invoke = [call = info.call, names = std::move(names)](const Arguments& a) -> OpResult {
        OpArgs inputs;
        for (const std::string& name : names) inputs.push_back(a.tensor(name));
        return call(inputs);
      };
    }
  }
  for (const Sample& sample : info.samples) {
    LOOM_CHECK(sample.attributes.empty() || (info.signature && !sample.call),
               "register_op: op '{}' sample '{}' states attributes without a schema, or beside a call", info.name,
               sample.label);
    for (const auto& [name, value] : sample.attributes) {
      const Parameter* p = info.signature->find(name);
      LOOM_CHECK(p != nullptr && fits(*p, value), "register_op: op '{}' sample '{}': attribute '{}' is not {} of {}",
                 info.name, sample.label, name, p ? "of the type" : "an argument", info.schema);
    }
  }
  auto& all = ops();
  // Keep the registry sorted so reports and tests have a stable order.
  auto at = std::lower_bound(all.begin(), all.end(), info.name,
                             [](const OpInfo& op, const std::string& name) { return op.name < name; });
  all.insert(at, std::move(info));
}

namespace detail {
const void* link_every_registration();  // generated: refers to every LOOM_OP, LOOM_KERNELS and LOOM_BENCH
}

OpCall sample_call(const OpInfo& op, const Sample& sample) {
  if (sample.call) return sample.call;
  if (!op.signature) return op.call;
  return [schema = *op.signature, invoke = op.invoke, attributes = sample.attributes,
          label = sample.label](const OpArgs& inputs) {
    // The inputs fill the tensor arguments in order (a Tensor[] takes the rest).
    std::vector<ArgumentValue> values;
    size_t next = 0;
    for (const Parameter& p : schema.parameters) {
      auto given = std::find_if(attributes.begin(), attributes.end(), [&](const auto& a) { return a.first == p.name; });
      if (p.type == ArgumentType::tensor && next < inputs.size()) {
        values.emplace_back(inputs[next++]);
      } else if (p.type == ArgumentType::tensor_list) {
        values.emplace_back(std::vector<Tensor>(inputs.begin() + static_cast<std::ptrdiff_t>(next), inputs.end()));
        next = inputs.size();
      } else if (given != attributes.end()) {
        values.push_back(given->second);
      } else {
        LOOM_CHECK(p.default_value.has_value(), "{}: sample '{}' gives no '{}', which has no default", schema.name,
                   label, p.name);
        values.push_back(*p.default_value);
      }
    }
    OpResult result = invoke(Arguments(schema, std::move(values)));
    if (const Tensor* one = std::get_if<Tensor>(&result)) return *one;
    std::vector<Tensor> flat;
    for (const Tensor& piece : std::get<std::vector<Tensor>>(result)) flat.push_back(reshape(piece, {-1}));
    return cat(flat, 0);
  };
}

const std::vector<OpInfo>& registered_ops() {
  // Referring to the generated list links every op file into a static build.
  [[maybe_unused]] static const void* linked = detail::link_every_registration();
  return ops();
}

const OpInfo* find_op(const std::string& name) {
  for (const auto& op : registered_ops())
    if (op.name == name) return &op;
  return nullptr;
}

void register_bench(BenchRegistration registration) {
  auto& all = benches();
  LOOM_CHECK(std::none_of(all.begin(), all.end(), [&](const auto& b) { return b.op == registration.op; }),
             "register_bench: op '{}' has its benchmark cases registered twice", registration.op);
  auto at = std::lower_bound(all.begin(), all.end(), registration.op,
                             [](const BenchRegistration& b, const std::string& op) { return b.op < op; });
  all.insert(at, std::move(registration));
}

const std::vector<BenchRegistration>& registered_bench() {
  [[maybe_unused]] static const void* linked = detail::link_every_registration();
  return benches();
}

const std::vector<BenchCase>& bench_cases(const std::string& op) {
  static const std::vector<BenchCase> none;
  for (const auto& b : registered_bench())
    if (b.op == op) return b.cases;
  return none;
}

}  // namespace loom
