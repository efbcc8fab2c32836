#include "loom/interrupt.h"

namespace loom {

namespace detail {
std::atomic<bool> g_interrupt_requested{false};
std::atomic<int> g_whole_kernels{0};

void raise_interrupt() {
  g_interrupt_requested.store(false);
  throw Interrupted();
}
}  // namespace detail

static_assert(std::atomic<bool>::is_always_lock_free, "request_interrupt must be async-signal-safe");

void request_interrupt() { detail::g_interrupt_requested.store(true); }
void clear_interrupt() { detail::g_interrupt_requested.store(false); }

WholeKernels::WholeKernels() { detail::g_whole_kernels.fetch_add(1); }
WholeKernels::~WholeKernels() { detail::g_whole_kernels.fetch_sub(1); }

}  // namespace loom
