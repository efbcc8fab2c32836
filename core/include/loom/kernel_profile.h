#pragma once
// Where a step's time goes, kernel by kernel (torch.profiler's table, per kernel):
//
//   KernelProfile profile;            // collects while it lives; one at a time
//   ... forward, backward, optimizer step ...
//   for (const KernelTime& row : profile.rows()) fmt::print(...);   // slowest first
//
// A row is one kernel of the table (op name) in one phase: "backward" inside a
// backward pass, the name of the innermost KernelPhase open (e.g. "optimizer"), or
// "forward"; its time is the wall time of its calls, outermost calls only
// (a kernel that calls ops counts their kernels as its own), measured on the thread
// that called it, so the rows add up to the time spent inside kernels. Everything
// else in a step (autograd's bookkeeping, allocation, Python-free glue) is the rest.
// On a GPU a kernel call only queues work: KernelProfile(device) waits for the device
// at the end of each outermost call, so a row is the kernel's run time (and the
// step, with nothing overlapped, is slower than unprofiled).
// `loom bench step --profile` prints it.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "loom/device.h"

namespace loom {

struct KernelTime {
  std::string kernel;
  std::string phase;
  int64_t calls = 0;
  double seconds = 0;
};

class KernelProfile {
 public:
  explicit KernelProfile(Device wait_for = Device{});  // the CPU: nothing to wait for
  ~KernelProfile();
  KernelProfile(const KernelProfile&) = delete;
  KernelProfile& operator=(const KernelProfile&) = delete;
  std::vector<KernelTime> rows() const;  // slowest first
  double kernel_seconds() const;         // the sum of the rows
  void clear();                          // forget what was collected (after warm-up steps, say)
};

// Names the phase of the kernels run on this thread while it lives.
class KernelPhase {
 public:
  explicit KernelPhase(const char* name);
  ~KernelPhase();
  KernelPhase(const KernelPhase&) = delete;
  KernelPhase& operator=(const KernelPhase&) = delete;

 private:
  const char* previous_;
};

namespace detail {
bool kernel_profiling();
// Times one kernel call while a KernelProfile lives (Kernel::operator() opens one).
class KernelTimer {
 public:
  explicit KernelTimer(std::string_view kernel);
  ~KernelTimer();
  KernelTimer(const KernelTimer&) = delete;
  KernelTimer& operator=(const KernelTimer&) = delete;

 private:
  std::string_view kernel_;
  int64_t start_ns_ = -1;  // -1: not the outermost call, or not profiling
};
}  // namespace detail

}  // namespace loom
