// --shard-optimizer (ZeRO stage 1, as Marian's sharded sync-SGD and llm.c's -z 1):
// each rank keeps Adam's moments for a contiguous share of the parameters and
// updates only those; the owners then send the updated parameters to every rank.
// Every rank still holds the whole reduced gradient, so clipping and Adam's
// arithmetic are the unsharded run's, element for element: the same bits.
#include "loom/models/trainer.h"
#include "loom/ops.h"

namespace loom::models {

std::vector<size_t> Trainer::owned_by(int rank) const {
  std::vector<size_t> owned;
  if (!sharded()) {  // every rank keeps and updates everything
    for (size_t k = 0; k < params_.size(); ++k) owned.push_back(k);
    return owned;
  }
  const int world = comm_->world_size();
  int64_t total = 0;
  for (const Tensor& p : params_) total += p.numel();
  // Parameter k goes to the rank whose share of the elements its first one falls in.
  int64_t at = 0;
  for (size_t k = 0; k < params_.size(); ++k) {
    const int owner = static_cast<int>(std::min<int64_t>(world - 1, at * world / total));
    if (owner == rank) owned.push_back(k);
    at += params_[k].numel();
  }
  return owned;
}

std::pair<int64_t, int64_t> Trainer::optimizer_state_bytes() const {
  int64_t mine = 0, all = 0;
  for (size_t k = 0; k < params_.size(); ++k) all += 2 * params_[k].numel() * dtype_size(params_[k].dtype());
  for (size_t k : owned_) mine += 2 * params_[k].numel() * dtype_size(params_[k].dtype());
  return {mine, all};
}

namespace {
// The tensors end to end, flattened, on `device` (the communicator's).
Tensor packed(const std::vector<Tensor>& tensors, Device device) {
  std::vector<Tensor> flat;
  for (const Tensor& t : tensors) flat.push_back(t.reshape({t.numel()}));
  return cat(flat).to(device);
}
}  // namespace

void Trainer::share_updated_parameters() {
  if (!sharded()) return;
  NoGradGuard no_grad;
  for (int r = 0; r < comm_->world_size(); ++r) {
    const std::vector<size_t> theirs = owned_by(r);
    if (theirs.empty()) continue;
    std::vector<Tensor> owned;
    int64_t n = 0;
    for (size_t k : theirs) {
      owned.push_back(params_[k]);
      n += params_[k].numel();
    }
    Tensor flat = r == comm_->rank() ? packed(owned, comm_->device())
                                     : Tensor::empty({n}, {params_.front().dtype(), comm_->device()});
    comm_->broadcast(flat, r);
    if (r == comm_->rank()) continue;
    const Tensor here = flat.to(options_.device);
    int64_t at = 0;
    for (const Tensor& p : owned) {
      copy_(p, here.narrow(0, at, p.numel()).view(p.shape()));
      at += p.numel();
    }
  }
}

Trainer::Moments Trainer::optimizer_moments() const {
  const size_t count = params_.size();
  Moments all{std::vector<Tensor>(count), std::vector<Tensor>(count), std::vector<int64_t>(count, 0), adam_->steps()};
  for (size_t i = 0; i < owned_.size(); ++i) {
    all.m[owned_[i]] = adam_->first_moments()[i];
    all.v[owned_[i]] = adam_->second_moments()[i];
    all.counts[owned_[i]] = adam_->update_counts()[i];
  }
  if (!sharded()) return all;
  // Each owner's moments and counts to every rank, the owners in turn.
  NoGradGuard no_grad;
  for (int r = 0; r < comm_->world_size(); ++r) {
    const std::vector<size_t> theirs = owned_by(r);
    if (theirs.empty()) continue;
    int64_t n = 0;
    for (size_t k : theirs) n += params_[k].numel();
    Tensor counts = Tensor::empty({static_cast<int64_t>(theirs.size())}, {DType::i64, kCPU});
    Tensor moments;
    if (r == comm_->rank()) {
      std::vector<Tensor> parts;
      for (int which = 0; which < 2; ++which)
        for (size_t k : theirs) {
          const Tensor& moment = which == 0 ? all.m[k] : all.v[k];
          parts.push_back(moment.defined() ? moment : zeros(params_[k].shape(), {params_[k].dtype(), options_.device}));
        }
      moments = packed(parts, comm_->device());
      for (size_t i = 0; i < theirs.size(); ++i) counts.data<int64_t>()[i] = all.counts[theirs[i]];
    } else {
      moments = Tensor::empty({2 * n}, {params_.front().dtype(), comm_->device()});
    }
    Tensor counts_there = counts.to(comm_->device());
    comm_->broadcast(counts_there, r);
    comm_->broadcast(moments, r);
    if (r == comm_->rank()) continue;
    counts = counts_there.to(kCPU);
    const Tensor here = moments.to(options_.device);
    int64_t at = 0;
    for (size_t i = 0; i < theirs.size(); ++i) {
      const size_t k = theirs[i];
      const int64_t size = params_[k].numel();
      all.counts[k] = counts.data<int64_t>()[i];
      if (all.counts[k] > 0) {
        all.m[k] = here.narrow(0, at, size).view(params_[k].shape()).clone();
        all.v[k] = here.narrow(0, n + at, size).view(params_[k].shape()).clone();
      }
      at += size;
    }
  }
  return all;
}

}  // namespace loom::models
