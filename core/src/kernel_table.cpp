#include "loom/kernel_table.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <tuple>

#include "loom/error.h"

namespace loom {

namespace {
KernelMode initial_mode() {
  const char* env = std::getenv("LOOM_KERNELS");
  return env && std::strcmp(env, "reference") == 0 ? KernelMode::reference : KernelMode::fast;
}
KernelMode g_mode = initial_mode();

// Kernels running now, on any thread (a kernel may call ops, which open their own).
std::atomic<int> g_kernel_depth{0};

// One row per op name; inside it, a flat array indexed by (device type, dtype).
struct OpKernels {
  detail::KernelEntry entries[kDeviceTypes][kDTypes];
};
using Table = std::map<std::string, OpKernels, std::less<>>;
Table& table() {
  static Table t;  // filled by static initializers: constructed on first use
  return t;
}
}  // namespace

KernelMode kernel_mode() { return g_mode; }
void set_kernel_mode(KernelMode mode) { g_mode = mode; }

std::vector<detail::RecordedCall>*& detail::call_recorder() {
  thread_local std::vector<RecordedCall>* recorder = nullptr;
  return recorder;
}

void detail::refuse_recording(std::string_view op) {
  fail("capture: {} returns a value to the host, which captured work cannot wait for", op);
}

KernelScope::KernelScope() { g_kernel_depth.fetch_add(1, std::memory_order_relaxed); }
KernelScope::~KernelScope() { g_kernel_depth.fetch_sub(1, std::memory_order_relaxed); }
bool KernelScope::active() { return g_kernel_depth.load(std::memory_order_relaxed) > 0; }

namespace detail {

void register_erased_kernel(std::string_view op, DeviceType device, DType dtype, KernelEntry entry) {
  LOOM_CHECK(entry.fast != nullptr, "register_kernel: op '{}' on {} {} has no fast kernel", op,
             device_type_name(device), dtype_name(dtype));
  auto row = table().try_emplace(std::string(op)).first;
  KernelEntry& slot = row->second.entries[static_cast<int>(device)][static_cast<int>(dtype)];
  LOOM_CHECK(slot.fast == nullptr, "register_kernel: op '{}' has two kernels for {} {}", op, device_type_name(device),
             dtype_name(dtype));
  slot = entry;
  slot.op = row->first;  // a map's keys stay put
}

const KernelEntry* lookup_kernel(std::string_view op, DeviceType device, DType dtype) {
  auto it = table().find(op);
  if (it == table().end()) return nullptr;
  const KernelEntry& e = it->second.entries[static_cast<int>(device)][static_cast<int>(dtype)];
  return e.fast ? &e : nullptr;
}

void missing_kernel(std::string_view op, Device device, DType dtype) {
  fail("{}: no kernel for device {} and dtype {} in this build", op, device, dtype_name(dtype));
}

void kernel_signature_mismatch(std::string_view op, Device device, DType dtype) {
  fail("{}: the kernel registered for {} {} has a different signature than the op calls it with", op, device,
       dtype_name(dtype));
}

}  // namespace detail

bool supports(std::string_view op, Device device, DType dtype) {
  return detail::lookup_kernel(op, device.type, dtype) != nullptr;
}

bool has_reference_kernel(std::string_view op, Device device, DType dtype) {
  const detail::KernelEntry* e = detail::lookup_kernel(op, device.type, dtype);
  return e && e->reference;
}

std::vector<KernelKey> registered_kernels() {
  std::vector<KernelKey> keys;
  for (const auto& [op, kernels] : table())
    for (int d = 0; d < kDeviceTypes; ++d)
      for (int t = 0; t < kDTypes; ++t)
        if (const detail::KernelEntry& e = kernels.entries[d][t]; e.fast)
          keys.push_back({op, static_cast<DeviceType>(d), static_cast<DType>(t), e.reference != nullptr});
  return keys;
}

void copy_kernels(DeviceType from, DeviceType to) {
  for (auto& [op, kernels] : table())
    for (int t = 0; t < kDTypes; ++t)
      if (kernels.entries[static_cast<int>(from)][t].fast)
        kernels.entries[static_cast<int>(to)][t] = kernels.entries[static_cast<int>(from)][t];
}

}  // namespace loom
