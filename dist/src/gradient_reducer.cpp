#include "loom/dist/gradient_reducer.h"

#include <chrono>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "dist_internal.h"
#include "loom/autograd.h"
#include "loom/backend.h"
#include "loom/kernel_table.h"
#include "loom/dist/tree_sum.h"

namespace loom::dist {

namespace {

constexpr std::string_view kOp = "GradientReducer";

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// Elements [begin, begin + n) of a flat tensor, as a view (core has no narrow: ops makes it).
Tensor elements(const Tensor& flat, int64_t begin, int64_t n) {
  return Tensor::make_view(flat, {n}, {1}, flat.offset() + begin);
}

struct Bucket {
  int64_t begin, end;  // its elements of the flat vector
};

}  // namespace

struct GradientReducer::State {
  Communicator& comm;
  GradientReducerOptions options;
  std::vector<Tensor> params;
  std::vector<int64_t> offsets;   // parameter k's first element in the flat vector
  std::vector<Bucket> buckets;    // in reduction order: the last parameters' first
  std::vector<size_t> bucket_of;  // parameter -> bucket
  std::vector<int64_t> params_in_bucket;
  int64_t total = 0;
  int64_t micro_batches;
  bool overlap;

  // This update.
  std::unique_ptr<TreeAccumulator> tree;  // holds the micro-batches before the last
  Tensor current;                         // this micro-batch's gradients, flat, on the parameters' device
  std::vector<char> arrived;              // per parameter, this micro-batch
  std::vector<int64_t> missing;           // per bucket: parameters yet to arrive (the last micro-batch)
  int64_t micro_batch = -1;               // the one running: -1 before an update's first
  bool armed = false;                     // between begin_micro_batch and end_micro_batch
  double exposed = 0, communication = 0;

  // With the communication thread. Buckets [0, reduced) are summed; ready[b] says b may be.
  std::mutex mutex;
  std::condition_variable changed;
  std::vector<char> ready;
  size_t reduced = 0;
  bool reducing = false;  // an update's last micro-batch started and its buckets are not all summed
  bool stop = false;
  std::exception_ptr error;
  std::thread thread;

  State(Communicator& c, GradientReducerOptions o, std::vector<Tensor> p, int64_t m)
      : comm(c), options(o), params(std::move(p)), micro_batches(m) {}

  bool last_micro_batch() const { return micro_batch == micro_batches - 1; }

  // The hook: parameter k's whole gradient of this micro-batch (autograd summed its uses).
  void arrive(size_t k, const Tensor& grad) {
    if (!armed) return;
    LOOM_CHECK(!arrived[k], "{}: parameter {} got two gradients in one micro-batch (one backward per micro-batch)", kOp,
               k);
    const Tensor dense = grad.is_contiguous() ? grad : dense_gradient(grad);
    const Tensor& p = params[k];
    const size_t bytes = static_cast<size_t>(p.numel()) * dtype_size(p.dtype());
    KernelScope device_call;  // a GPU's memory is touched by its Backend only
    backend(p.device().type)
        .copy(static_cast<char*>(current.raw_data()) + offsets[k] * dtype_size(p.dtype()), p.device(), dense.raw_data(),
              dense.device(), bytes);
    arrived[k] = 1;
    if (last_micro_batch() && overlap && --missing[bucket_of[k]] == 0) mark_ready(bucket_of[k]);
  }

  void mark_ready(size_t b) {
    {
      std::lock_guard lock(mutex);
      ready[b] = 1;
    }
    changed.notify_all();
  }

  bool exact() const { return options.mode == Reduce::exact; }

  // The exact mode sums this rank's part of the tree over every rank's micro-batches
  // (its largest subtrees); the fast one its own micro-batches, in their own tree.
  std::unique_ptr<TreeAccumulator> new_tree() const {
    const int64_t rank = comm.rank(), m = micro_batches;
    if (!exact()) return std::make_unique<TreeAccumulator>(m);
    return std::make_unique<TreeAccumulator>(m * comm.world_size(), LeafRange{rank * m, (rank + 1) * m});
  }

  // The local sums of some elements (TreeAccumulator::finish_range's) summed across
  // ranks into the last of them.
  void all_reduce(std::vector<Tensor>& sums) {
    if (exact()) {
      comm.all_reduce_tree(sums, micro_batches, sums.back());
    } else {
      comm.all_reduce_sum(sums.back(), options.mode);  // one sum: the rank's own tree
    }
  }

  // Bucket b's elements of the local tree, then of the cross-rank sum, in place in `current`.
  void reduce_bucket(size_t b) {
    const auto start = Clock::now();
    Tensor range = elements(current, buckets[b].begin, buckets[b].end - buckets[b].begin);
    std::vector<Tensor> sums = tree->finish_range(range, buckets[b].begin, range);
    all_reduce(sums);
    communication += seconds_since(start);
  }

  void communicate() {
#ifdef _OPENMP
    omp_set_num_threads(1);  // the adds are memory-bound, and backward's threads have the cores
#endif
    std::unique_lock lock(mutex);
    for (;;) {
      changed.wait(lock, [&] { return stop || (reducing && ready[reduced]); });
      if (stop) return;
      const size_t b = reduced;
      lock.unlock();
      try {
        reduce_bucket(b);
      } catch (...) {
        lock.lock();
        error = std::current_exception();
        reducing = false;
        changed.notify_all();
        continue;
      }
      lock.lock();
      if (++reduced == buckets.size()) reducing = false;
      changed.notify_all();
    }
  }
};

GradientReducer::GradientReducer(Communicator& comm, std::vector<Tensor> parameters, int64_t micro_batches,
                                 GradientReducerOptions options)
    : state_(std::make_shared<State>(comm, options, std::move(parameters), micro_batches)) {
  State& s = *state_;
  LOOM_CHECK(!s.params.empty(), "{}: no parameters", kOp);
  LOOM_CHECK(micro_batches >= 1, "{}: needs at least one micro-batch per update, not {}", kOp, micro_batches);
  LOOM_CHECK(options.bucket_bytes >= 1, "{}: the bucket size must be at least 1 byte, not {}", kOp,
             options.bucket_bytes);
  const Tensor& first = s.params.front();
  for (size_t k = 0; k < s.params.size(); ++k) {
    const Tensor& p = s.params[k];
    LOOM_CHECK(p.requires_grad() && p.dtype() == first.dtype() && p.device() == first.device(),
               "{}: parameter {} is {} on {}{}; parameter 0 is {} on {}", kOp, k, dtype_name(p.dtype()), p.device(),
               p.requires_grad() ? "" : " and needs no gradient", dtype_name(first.dtype()), first.device());
    s.offsets.push_back(s.total);
    s.total += p.numel();
  }
  // Buckets of whole parameters, from the last one back.
  s.bucket_of.resize(s.params.size());
  const int64_t element_bytes = static_cast<int64_t>(dtype_size(first.dtype()));
  for (size_t end = s.params.size(); end > 0;) {
    size_t begin = end - 1;
    int64_t bytes = s.params[begin].numel() * element_bytes;
    while (begin > 0 && bytes + s.params[begin - 1].numel() * element_bytes <= options.bucket_bytes)
      bytes += s.params[--begin].numel() * element_bytes;
    for (size_t k = begin; k < end; ++k) s.bucket_of[k] = s.buckets.size();
    s.buckets.push_back({s.offsets[begin], s.offsets[end - 1] + s.params[end - 1].numel()});
    s.params_in_bucket.push_back(static_cast<int64_t>(end - begin));
    end = begin;
  }
  s.overlap =
      options.overlap && first.device().is_cpu() && comm.device().is_cpu() && comm.collectives_from_any_thread();
  for (size_t k = 0; k < s.params.size(); ++k) {
    // The hook holds the state weakly: a model that outlives its reducer trains on without it.
    std::weak_ptr<State> weak = state_;
    s.params[k].register_hook([weak, k](const Tensor& grad) {
      if (auto state = weak.lock()) state->arrive(k, grad);
      return Tensor();
    });
  }
  if (s.overlap) s.thread = std::thread([state = state_] { state->communicate(); });
}

GradientReducer::~GradientReducer() {
  State& s = *state_;
  if (!s.thread.joinable()) return;
  bool stuck;
  {
    std::lock_guard lock(s.mutex);
    s.stop = true;
    // Mid-collective (another rank failed; its abort ends this process too): not joined.
    stuck = s.reducing && s.ready[s.reduced];
  }
  s.changed.notify_all();
  if (stuck) {
    s.thread.detach();  // it holds the state
  } else {
    s.thread.join();
  }
}

void GradientReducer::begin_micro_batch() {
  State& s = *state_;
  LOOM_CHECK(!s.armed, "{}: begin_micro_batch twice without end_micro_batch", kOp);
  if (s.micro_batch < 0) {  // an update's first
    s.tree = s.new_tree();
    s.current = Tensor::empty({s.total}, {s.params.front().dtype(), s.params.front().device()});
    s.micro_batch = 0;
  }
  s.arrived.assign(s.params.size(), 0);
  if (s.last_micro_batch()) {
    s.missing = s.params_in_bucket;
    std::lock_guard lock(s.mutex);
    s.ready.assign(s.buckets.size(), 0);
    s.reduced = 0;
    s.reducing = true;
    s.error = nullptr;
    s.communication = 0;
  }
  s.armed = true;
}

void GradientReducer::end_micro_batch() {
  State& s = *state_;
  LOOM_CHECK(s.armed, "{}: end_micro_batch without begin_micro_batch", kOp);
  s.armed = false;
  // A parameter backward did not reach (or a micro-batch this rank lacks) adds zeros.
  for (size_t k = 0; k < s.params.size(); ++k)
    if (!s.arrived[k]) device_fill(elements(s.current, s.offsets[k], s.params[k].numel()), 0.0);
  if (!s.last_micro_batch()) {
    s.tree->add(s.current.device().is_cpu() ? s.current : transfer(s.current, Device::cpu()));
    ++s.micro_batch;
    return;
  }
  if (!s.current.device().is_cpu()) s.current = transfer(s.current, Device::cpu());
  if (s.overlap)
    for (size_t b = 0; b < s.buckets.size(); ++b)
      if (s.missing[b] > 0) s.mark_ready(b);
}

Tensor GradientReducer::finish() {
  State& s = *state_;
  LOOM_CHECK(s.micro_batch == s.micro_batches - 1 && !s.armed,
             "{}: finish() before the end of the update's micro-batches ({} per update)", kOp, s.micro_batches);
  s.micro_batch = -1;
  const auto start = Clock::now();
  if (s.overlap) {
    std::unique_lock lock(s.mutex);
    s.changed.wait(lock, [&] { return !s.reducing; });
    if (s.error) std::rethrow_exception(s.error);
  } else if (s.comm.device().is_cpu()) {
    for (size_t b = 0; b < s.buckets.size(); ++b) s.reduce_bucket(b);
  } else {
    // A GPU communicator: one all-reduce of the whole vector on its device.
    std::vector<Tensor> sums = s.tree->finish_range(s.current, 0, s.current);
    for (Tensor& sum : sums) sum = transfer(sum, s.comm.device());
    s.all_reduce(sums);
    s.current = sums.back();
    s.communication = seconds_since(start);
  }
  s.exposed = seconds_since(start);
  s.tree.reset();
  return std::exchange(s.current, Tensor());
}

int64_t GradientReducer::bucket_count() const { return static_cast<int64_t>(state_->buckets.size()); }
bool GradientReducer::overlaps() const { return state_->overlap; }
double GradientReducer::exposed_seconds() const { return state_->exposed; }
double GradientReducer::communication_seconds() const { return state_->communication; }

}  // namespace loom::dist
