#pragma once
// loom::dist::GradientReducer: a data-parallel update's parameter gradients, summed
// over this rank's micro-batches (the tree of tree_sum.h) and over ranks, with the
// cross-rank sum overlapping the last micro-batch's backward, as PyTorch DDP's
// reducer does.
//
// The parameters lie end to end in one flat vector, cut into buckets of about
// `bucket_bytes` (whole parameters, the last ones first: backward reaches them
// first). A hook on each parameter copies its gradient into the vector once
// autograd has summed it. In the rank's last micro-batch, a bucket whose parameters
// have all arrived is finished (the local tree) and all-reduced by a communication
// thread, bucket after bucket in the same order on every rank, while backward goes
// on. Every element is summed as the whole vector's reduction sums it: buckets and
// overlap never change the bits.
#include <cstdint>
#include <memory>
#include <vector>

#include "loom/dist/communicator.h"

namespace loom::dist {

struct GradientReducerOptions {
  Reduce mode = Reduce::exact;
  int64_t bucket_bytes = int64_t{25} << 20;  // PyTorch DDP's default bucket_cap_mb
  // A communication thread while backward runs; off (or a communicator whose
  // collectives must stay on the thread that made it, or parameters off the CPU):
  // the buckets are reduced after backward, on the calling thread.
  bool overlap = true;
};

class GradientReducer {
 public:
  // `micro_batches`: this rank's micro-batches per update. The parameters must
  // require grad and share one float dtype and device.
  GradientReducer(Communicator& comm, std::vector<Tensor> parameters, int64_t micro_batches,
                  GradientReducerOptions options = {});
  ~GradientReducer();
  GradientReducer(const GradientReducer&) = delete;
  GradientReducer& operator=(const GradientReducer&) = delete;

  // Around each of this rank's micro-batches: backward runs in between (or not at
  // all, for a micro-batch this rank lacks at an epoch's end: it adds zeros).
  void begin_micro_batch();
  void end_micro_batch();
  // After the last micro-batch: the sum over every rank's micro-batches, flat (the
  // parameters' order), on the communicator's device.
  Tensor finish();

  int64_t bucket_count() const;
  bool overlaps() const;
  // Of the last update: the time finish() waited for the reduction after backward
  // ended (exposed), and the whole cross-rank reduction's time (overlapped or not).
  double exposed_seconds() const;
  double communication_seconds() const;

 private:
  struct State;
  std::shared_ptr<State> state_;  // shared with the hooks and the communication thread
};

}  // namespace loom::dist
