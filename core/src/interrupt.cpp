#include "loom/interrupt.h"

namespace loom {

namespace detail {
std::atomic<bool> g_interrupt_requested{false};

void raise_interrupt() {
  g_interrupt_requested.store(false);
  throw Interrupted();
}
}  // namespace detail

static_assert(std::atomic<bool>::is_always_lock_free, "request_interrupt must be async-signal-safe");

void request_interrupt() { detail::g_interrupt_requested.store(true); }
void clear_interrupt() { detail::g_interrupt_requested.store(false); }

}  // namespace loom
