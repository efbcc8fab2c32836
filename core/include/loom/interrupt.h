#pragma once
// Stopping a long computation from outside it (Ctrl-C in Python, a GUI's cancel
// button): request_interrupt() makes the next kernel call, on any thread, throw
// loom::Interrupted, once (the request is consumed). It only stores an atomic
// flag, so a signal handler may call it. A call under way finishes its current
// kernel first; whatever it was building is dropped with the exception.
#include <atomic>

#include "loom/error.h"

namespace loom {

class Interrupted : public Error {
 public:
  Interrupted() : Error("interrupted (a kernel call saw request_interrupt())") {}
};

void request_interrupt();  // async-signal-safe
void clear_interrupt();    // forget a request made before the call that should see it

namespace detail {
extern std::atomic<bool> g_interrupt_requested;
[[noreturn]] void raise_interrupt();  // consumes the request and throws Interrupted
inline void check_interrupt() {
  if (g_interrupt_requested.load(std::memory_order_relaxed)) raise_interrupt();
}
}  // namespace detail

}  // namespace loom
