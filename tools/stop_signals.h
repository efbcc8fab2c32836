#pragma once
// Ctrl-C and SIGTERM, taken on a thread of their own. main() blocks SIGINT and
// SIGTERM before any other thread exists, so every thread (OpenMP's, OpenBLAS's,
// oneDNN's) inherits the block, and one watcher thread waits for them (sigwait).
// A signal then never interrupts a compute thread: oneDNN 2.6's float32 JIT gemm
// points the stack pointer at a heap buffer while it runs, and a signal handler's
// frame pushed there corrupted the heap (`free(): invalid pointer`, exit 134).
#include <atomic>

namespace loom::tools {

// Call first in main, before any thread starts.
void route_stop_signals();

// While a StopScope lives (a training run), the first SIGINT or SIGTERM asks the
// run to stop: stop_requested() turns true, and the run saves and returns. A
// second signal, or one outside a scope, ends loom with the signal's default
// action (exit code 128 + signal), after removing the temporaries of the files
// being written (loom/atomic_file.h), so a save cut short leaves nothing behind.
class StopScope {
 public:
  StopScope();
  ~StopScope();
  StopScope(const StopScope&) = delete;
  StopScope& operator=(const StopScope&) = delete;
};
bool stop_requested();
const std::atomic<bool>& stop_flag();  // what TrainerHooks::stop points at
int stop_signal();                     // the signal that asked, 0 if none

// For a child process (gnuplot) between fork and exec: the default mask back.
void unblock_stop_signals_in_child();

}  // namespace loom::tools
