#include "loom/registry.h"

#include <algorithm>

#include "loom/error.h"

namespace loom {

namespace {
std::vector<OpInfo>& ops() {
  static std::vector<OpInfo> registry;
  return registry;
}
}  // namespace

void register_op(OpInfo info) {
  LOOM_CHECK(!info.name.empty(), "register_op: an op needs a name");
  LOOM_CHECK(std::none_of(ops().begin(), ops().end(), [&](const OpInfo& op) { return op.name == info.name; }), "register_op: op '{}' is registered twice", info.name);
  LOOM_CHECK(info.call != nullptr, "register_op: op '{}' has no call", info.name);
  LOOM_CHECK(!info.samples.empty(), "register_op: op '{}' has no samples: nothing would test it", info.name);
  auto& all = ops();
  // Keep the registry sorted so reports and tests have a stable order.
  auto at = std::lower_bound(all.begin(), all.end(), info.name,
                             [](const OpInfo& op, const std::string& name) { return op.name < name; });
  all.insert(at, std::move(info));
}

namespace detail {
const void* link_every_registration();  // generated: refers to every LOOM_OP and LOOM_KERNELS
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

}  // namespace loom
