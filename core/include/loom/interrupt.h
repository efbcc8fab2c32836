#pragma once
// Stopping a long computation from outside it (Ctrl-C in Python, a GUI's cancel
// button): request_interrupt() makes the next kernel call, on any thread, throw
// loom::Interrupted, once (the request is consumed). It only stores an atomic
// flag, so a signal handler may call it. A kernel under way stops at its next block
// of work (the long loops poll the flag: loops.h, reduce.h) and the call throws as
// it returns; whatever it was building is dropped with the exception.
#include <atomic>

#include "loom/error.h"

namespace loom {

class Interrupted : public Error {
 public:
  Interrupted() : Error("interrupted (a kernel call saw request_interrupt())") {}
};

void request_interrupt();  // async-signal-safe
void clear_interrupt();    // forget a request made before the call that should see it

// While one lives, no kernel stops early (a request waits for the next kernel call):
// for kernels that write into tensors they were given (copy_, fill_, the optimizer
// steps), which must not be left half written.
class WholeKernels {
 public:
  WholeKernels();
  ~WholeKernels();
  WholeKernels(const WholeKernels&) = delete;
  WholeKernels& operator=(const WholeKernels&) = delete;
};

namespace detail {
extern std::atomic<bool> g_interrupt_requested;
extern std::atomic<int> g_whole_kernels;
[[noreturn]] void raise_interrupt();  // consumes the request and throws Interrupted
inline bool interrupt_requested() { return g_interrupt_requested.load(std::memory_order_relaxed); }
inline void check_interrupt() {
  if (interrupt_requested()) raise_interrupt();
}
// For the long loops, between blocks of work: whether to return early (the
// output unfinished; the Kernel wrapper throws as the kernel returns).
inline bool stop_kernel_early() {
  return interrupt_requested() && g_whole_kernels.load(std::memory_order_relaxed) == 0;
}
}  // namespace detail

}  // namespace loom
