#pragma once
// The kernel table: kernels registered under (op, device type, dtype), each a
// fast kernel and, where one exists, the plain reference kernel kept beside it
// (straightforward loops a student can step through; the test matrix diffs the
// two on every sample). An op file checks shapes, allocates its output, looks up
// the kernel for its inputs' device and dtype once per call, and runs it:
//
//   find_kernel<SoftmaxKernel>("softmax", x.device(), x.dtype())(out, x, mask);
//
// A kernel is a plain function pointer whose signature the op declares
// (ops/include/loom/ops/kernel_signatures.h); the table checks it on lookup.
// LOOM_KERNELS=reference (or KernelModeGuard) picks the reference kernels.
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <type_traits>
#include <typeindex>
#include <utility>
#include <vector>

#include "loom/device.h"
#include "loom/dtype.h"
#include "loom/interrupt.h"
#include "loom/kernel_profile.h"

namespace loom {

enum class KernelMode { fast, reference };
KernelMode kernel_mode();
void set_kernel_mode(KernelMode mode);

class KernelModeGuard {
 public:
  explicit KernelModeGuard(KernelMode mode) : previous_(kernel_mode()) { set_kernel_mode(mode); }
  ~KernelModeGuard() { set_kernel_mode(previous_); }
  KernelModeGuard(const KernelModeGuard&) = delete;
  KernelModeGuard& operator=(const KernelModeGuard&) = delete;

 private:
  KernelMode previous_;
};

// Open while a kernel (or a Backend call) runs. Memory of a device that is not
// host-accessible may be touched only then: Storage::data() refuses otherwise,
// which is how the stand-in device catches an op reading memory behind the table.
class KernelScope {
 public:
  KernelScope();
  ~KernelScope();
  KernelScope(const KernelScope&) = delete;
  KernelScope& operator=(const KernelScope&) = delete;
  static bool active();
};

// Recording kernel calls for a replay: the stand-in device's captured work
// (loom/capture.h) keeps each outermost call a captured step makes as a closure over
// copies of its arguments (the same tensors, so the same memory, as a CUDA graph),
// without running it, and calls them, in order, at each replay. A random kernel's draw is moved by the
// replay's offset: rebase_random, overloaded beside the argument types that carry a
// Philox offset (kernels::DropoutDraw, kernels::AttentionArgs), found by ADL.
template <typename T>
const T& rebase_random(const T& argument, uint64_t) {
  return argument;
}
namespace detail {
using RecordedCall = std::function<void(uint64_t random_offset)>;
// The recorder of this thread's calls, or null (the usual case: nothing recorded).
// A recorded call does not run, so no call is made inside one while recording.
std::vector<RecordedCall>*& call_recorder();
// A kernel that returns a value to the host cannot be recorded: an Error naming it.
[[noreturn]] void refuse_recording(std::string_view op);
}  // namespace detail

namespace detail {
using ErasedKernel = void (*)();
struct KernelEntry {
  std::type_index signature = typeid(void);
  ErasedKernel fast = nullptr;
  ErasedKernel reference = nullptr;  // null: the fast kernel is the only one
  std::string_view op;               // the table's own copy of the op name
};
void register_erased_kernel(std::string_view op, DeviceType device, DType dtype, KernelEntry entry);
// The entry, or null when the device has no kernel for this op and dtype.
const KernelEntry* lookup_kernel(std::string_view op, DeviceType device, DType dtype);
[[noreturn]] void missing_kernel(std::string_view op, Device device, DType dtype);
[[noreturn]] void kernel_signature_mismatch(std::string_view op, Device device, DType dtype);
}  // namespace detail

// A kernel found in the table; calling it opens a KernelScope (and is timed while a
// KernelProfile collects: loom/kernel_profile.h).
template <typename Fn>
class Kernel {
 public:
  Kernel(Fn fn, std::string_view op) : fn_(fn), op_(op) {}
  template <typename... Args>
  std::invoke_result_t<Fn, Args...> operator()(Args&&... args) const {
    // Recorded, not run: as on a GPU, nothing runs while work is captured.
    if constexpr (std::is_void_v<std::invoke_result_t<Fn, Args...>>) {
      if (std::vector<detail::RecordedCall>* recorder = detail::call_recorder()) {
        recorder->push_back([kernel = *this, ... copies = std::decay_t<Args>(args)](uint64_t random_offset) {
          kernel(rebase_random(copies, random_offset)...);
        });
        return;
      }
    } else {
      if (detail::call_recorder()) detail::refuse_recording(op_);
    }
    detail::check_interrupt();  // a relaxed load: request_interrupt() stops a long run between kernels
    KernelScope scope;
    detail::KernelTimer timer(op_);
    // A long kernel that saw the request may have returned early: its output is unfinished.
    if constexpr (std::is_void_v<std::invoke_result_t<Fn, Args...>>) {
      fn_(std::forward<Args>(args)...);
      if (detail::stop_kernel_early()) detail::raise_interrupt();
    } else {
      auto result = fn_(std::forward<Args>(args)...);
      if (detail::stop_kernel_early()) detail::raise_interrupt();
      return result;
    }
  }

 private:
  Fn fn_;
  std::string_view op_;
};

// Registers op's kernels for one device type and dtype (at load time: see LOOM_KERNELS).
template <typename Fn>
void register_kernel(std::string_view op, DeviceType device, DType dtype, Fn fast, Fn reference = nullptr) {
  static_assert(std::is_pointer_v<Fn> && std::is_function_v<std::remove_pointer_t<Fn>>,
                "a kernel is a plain function pointer");
  detail::register_erased_kernel(
      op, device, dtype,
      {typeid(Fn), reinterpret_cast<detail::ErasedKernel>(fast), reinterpret_cast<detail::ErasedKernel>(reference)});
}

// Whether `device` can run `op` on `dtype`.
bool supports(std::string_view op, Device device, DType dtype);
// Whether op has a reference kernel beside its fast one there.
bool has_reference_kernel(std::string_view op, Device device, DType dtype);

// The kernel for op on device and dtype (the reference one in reference mode,
// where it exists); an Error naming the op, device and dtype when there is none.
template <typename Fn>
Kernel<Fn> find_kernel(std::string_view op, Device device, DType dtype) {
  const detail::KernelEntry* e = detail::lookup_kernel(op, device.type, dtype);
  if (!e) detail::missing_kernel(op, device, dtype);
  if (e->signature != typeid(Fn)) detail::kernel_signature_mismatch(op, device, dtype);
  detail::ErasedKernel k = kernel_mode() == KernelMode::reference && e->reference ? e->reference : e->fast;
  return Kernel<Fn>(reinterpret_cast<Fn>(k), e->op);
}

struct KernelKey {
  std::string op;
  DeviceType device;
  DType dtype;
  bool has_reference;
};
// Every registered kernel, sorted by op, device, dtype.
std::vector<KernelKey> registered_kernels();

// Registers every kernel of device type `from` under `to` as well (the stand-in
// device runs the CPU kernels).
void copy_kernels(DeviceType from, DeviceType to);

// A block of kernel registrations, run at load time and referenced from one
// generated list (ops/CMakeLists.txt) so a static link keeps every one:
//   LOOM_KERNELS(cpu_softmax) { register_kernel<SoftmaxKernel>("softmax", ...); }
struct KernelRegistrar {
  explicit KernelRegistrar(void (*body)()) { body(); }
};
#define LOOM_KERNELS(id)                                                   \
  static void loom_kernels_body_##id();                                    \
  extern const ::loom::KernelRegistrar loom_kernels_##id;                  \
  const ::loom::KernelRegistrar loom_kernels_##id{loom_kernels_body_##id}; \
  static void loom_kernels_body_##id()

}  // namespace loom
