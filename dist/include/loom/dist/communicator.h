#pragma once
// loom::dist::Communicator: the processes of a data-parallel run and the
// collectives between them. Backends: "self" (one process, always built), "mpi"
// (CPU tensors over MPI, built when CMake finds Open MPI) and "nccl" (CUDA tensors
// over NCCL, added by the CUDA layer when CMake finds NCCL).
//
// Every collective first agrees with the other ranks, in one small all-reduce, on
// which collective it is (its kind and sequence number) and on the arguments
// (element count, dtype, mode, root): a rank whose input is wrong, or ranks that
// disagree or are out of step, make every rank throw a loom::Error naming the op and
// the ranks. A collective that waits past a timeout for the others (a rank stopped,
// or never calls it) ends the job naming itself: never a hang.
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "loom/tensor.h"

namespace loom::dist {

// How all_reduce_sum and reduce_scatter_sum add across ranks.
enum class Reduce {
  exact,  // a fixed tree over ranks, tree_sum.h's ((r0 + r1) + r2 at 3 ranks): with
          // all_reduce_tree, the same bits at any world size
  fast,   // the library's own algorithm (MPI_Allreduce): its order, so bits may differ
};
std::string_view reduce_name(Reduce mode);

// One value every rank must hold equally, for Communicator::agree.
struct Agreed {
  std::string_view what;  // "element count", "dtype", ...
  int64_t value;
  std::function<std::string(int64_t value)> show = {};  // how to print it (default: the number)
};

class Communicator {
 public:
  virtual ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  virtual std::string_view backend_name() const = 0;
  // Where the collectives' tensors live: the CPU, or this rank's GPU ("nccl").
  virtual Device device() const { return Device::cpu(); }
  // Whether the collectives may be called from a thread other than the one that made
  // the communicator (one thread at a time): GradientReducer's communication thread.
  virtual bool collectives_from_any_thread() const { return false; }

  // Every rank's `t` (float32/float64, on device(), contiguous, one shape everywhere)
  // is replaced, in place, by the sum over ranks. The exact mode runs on host memory:
  // a GPU tensor is copied there and back.
  void all_reduce_sum(Tensor& t, Reduce mode = Reduce::exact);
  // The exact sum of the tree over every rank's micro-batches (tree_sum.h), rank r
  // holding [r * m, (r + 1) * m) of the world_size() * m: `subtree_sums` are this
  // rank's TreeAccumulator::subtree_sums(), tensors as all_reduce_sum's. `out` (one of
  // them, or another) gets the tree's sum on every rank: the bits of one process's
  // tree_sum over all the micro-batches, at any world size.
  void all_reduce_tree(std::span<const Tensor> subtree_sums, int64_t micro_batches_per_rank, Tensor& out);
  // `input` holds world_size() equal chunks; rank r's `output` (one chunk's elements)
  // gets the sum over ranks of chunk r. Exact mode: the same bits as that chunk of
  // all_reduce_sum's exact result.
  void reduce_scatter_sum(const Tensor& input, Tensor& output, Reduce mode = Reduce::exact);
  // `output` (world_size() * input.numel() elements) gets every rank's `input`, in
  // rank order. Any dtype: it copies.
  void all_gather(const Tensor& input, Tensor& output);
  // Every rank's `t` is replaced by rank `root`'s. Any dtype.
  void broadcast(Tensor& t, int root);
  void barrier();
  // Ends the whole job (every rank) with exit code `code` after printing `why`.
  [[noreturn]] virtual void abort(int code, std::string_view why) = 0;

  // Throws on every rank when any rank's `local_problem` is not empty (that rank
  // throws its own message, the others name it) or when the ranks' `values` differ
  // (naming the value and its range over ranks). For a run's start-up checks (same
  // data, preset, seed on every rank); a collective itself, as the others are.
  void agree(std::string_view op, std::string_view local_problem, std::span<const Agreed> values);
  void agree(std::string_view op, std::string_view local_problem, std::initializer_list<Agreed> values) {
    agree(op, local_problem, std::span<const Agreed>(values.begin(), values.size()));
  }

  // A collective that has waited this long for the other ranks ends the job
  // (abort(1, ...)), naming itself, its sequence number and its rank, as PyTorch's
  // NCCL watchdog does. 0: no limit. The default: LOOM_COLLECTIVE_TIMEOUT (seconds)
  // where it is set, else 30 minutes. Timed only with more than one rank.
  void set_timeout(double seconds);
  double timeout() const;
  // The collectives this rank has started: the sequence number every collective's
  // agreement compares across ranks.
  int64_t collectives_started() const;

  // Point to point, for algorithms built on the backend (the exact reduction),
  // within a collective:
  // sends send_count elements of host memory to rank `peer` while receiving
  // recv_count from it; both ranks call it with each other as peer.
  virtual void send_recv(int peer, const void* send, int64_t send_count, void* recv, int64_t recv_count,
                         DType dtype) = 0;

 protected:
  Communicator();

 private:
  class Collective;  // one collective's span: its sequence number, timed by the watchdog
  struct Watchdog;
  // agree() within a collective: one all-reduce of its kind, sequence number and values.
  void agree_in(const Collective& collective, std::string_view local_problem, std::span<const Agreed> values);
  void agree_in(const Collective& collective, std::string_view local_problem, std::initializer_list<Agreed> values) {
    agree_in(collective, local_problem, std::span<const Agreed>(values.begin(), values.size()));
  }
  [[noreturn]] void out_of_step(const Collective& collective, int64_t kind);

  std::unique_ptr<Watchdog> watchdog_;

  // The backends' parts, called once the arguments are checked and agreed on.
  virtual void all_reduce_max(std::span<int64_t> values) = 0;  // elementwise, in place
  virtual void all_reduce_sum_fast(Tensor& t) = 0;
  virtual void reduce_scatter_sum_fast(const Tensor& input, Tensor& output) = 0;
  virtual void all_gather_impl(const Tensor& input, Tensor& output) = 0;
  virtual void broadcast_impl(Tensor& t, int root) = 0;
};

// backend: "self" (one process), "mpi" (initialises MPI if nobody has, finalises it
// at exit), a registered one ("nccl": its ranks are "auto"'s), or "auto": "mpi" when started by an MPI launcher (mpirun, mpiexec, srun
// --mpi=pmix), seen in its environment variables, else "self" (a plain process
// never initialises MPI).
std::unique_ptr<Communicator> make_communicator(std::string_view backend = "auto");
// Whether this loom has the "mpi" backend.
bool built_with_mpi();

// A backend another library adds at load time (the CUDA layer's "nccl"), made by
// make_communicator(name).
using CommunicatorFactory = std::unique_ptr<Communicator> (*)();
void register_communicator_backend(std::string_view name, CommunicatorFactory make);
bool has_communicator_backend(std::string_view name);

// The sum over every rank's micro-batches, each rank holding the same number of
// consecutive ones: TreeAccumulator's subtrees locally, then all_reduce_tree. The
// same bits as tree_sum over all of them in one process.
Tensor sum_micro_batches(Communicator& comm, const std::vector<Tensor>& local_micro_batch_grads);

}  // namespace loom::dist
