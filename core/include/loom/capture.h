#pragma once
// Capturing a device's work once and replaying it: on CUDA a CUDA graph. A training
// step of a fixed shape issues about 1,400 kernel launches, each a few microseconds of
// host time; replayed, the step is one launch.
//
// What capturing asks of the work (nothing runs while it is captured):
// - no copy to or from the host and no wait for the device: a value read back would
//   not exist yet. Kernels that would wait to report bad input (index checks) skip
//   that check while capturing. The stand-in device captures too (it records each
//   kernel call, fill and copy with its arguments and replays them) and refuses every
//   copy between the host and itself: a CPU test finds what would break a GPU's
//   capture, and checks replays against eager steps.
// - fixed addresses: a replay reads and writes exactly the memory the capture used.
//   What the work allocates comes from a private pool kept for the captured work
//   (Allocator::begin_pool), and the tensors it leaves behind (a loss, gradients)
//   hold each replay's results. Inputs are written into the same tensors before a replay.
// - random draws relative to the capture: set the generator's offset to 0 before
//   capturing; each replay is given the offset where its draws start, kept on the
//   device and added by the random kernels, so every replay draws new masks, those an
//   eager run from that offset would draw.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <utility>

#include "loom/device.h"

namespace loom {

// The memory captured work allocates from (the device allocator's private pool),
// given back when the last work captured into it is gone. Works captured into one pool
// share the memory of their temporaries: replay them one at a time on the device's
// stream, and read what one leaves in the pool's memory before another is replayed.
// capture() without a pool gives the work one of its own.
class CapturePool {
 public:
  explicit CapturePool(Device device) : device_(device) {}
  ~CapturePool();
  CapturePool(const CapturePool&) = delete;
  CapturePool& operator=(const CapturePool&) = delete;
  Device device() const { return device_; }
  uint64_t& id() { return id_; }  // the allocator's pool (0 until a capture made it)

 private:
  Device device_;
  uint64_t id_ = 0;
};

class CapturedWork {
 public:
  virtual ~CapturedWork() = default;
  // Queues the captured work again on its device's stream (no wait), its random ops
  // drawing from random_offset on.
  virtual void replay(uint64_t random_offset) = 0;
  // The operations (kernels, copies, fills) one replay runs (a CUDA graph: in one launch).
  virtual size_t operations() const = 0;
  // The pool its memory is in, kept while it lives (set by capture()).
  void keep(std::shared_ptr<CapturePool> pool) { pool_ = std::move(pool); }

 private:
  std::shared_ptr<CapturePool> pool_;
};

// Runs `work` once under capture on `device` and returns it ready to replay. An Error
// names the device where it cannot capture (the CPU) and what broke a capture.
std::unique_ptr<CapturedWork> capture(Device device, const std::function<void()>& work,
                                      std::shared_ptr<CapturePool> pool = nullptr);
// Whether this thread is capturing work on `device` now.
bool capturing(Device device);
// A device's Backend::copy calls this first: an Error naming the copy when it reads
// from or writes to the host while work on `device` is captured.
void check_capturable_copy(Device device, Device src, Device dst, size_t bytes);

}  // namespace loom
