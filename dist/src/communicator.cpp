#include "loom/dist/communicator.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <limits>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "dist_internal.h"
#include "loom/backend.h"
#include "loom/kernel_table.h"
#include "loom/dist/tree_sum.h"

namespace loom::dist {

namespace {

std::string show_dtype(int64_t value) { return std::string(dtype_name(static_cast<DType>(value))); }
std::string show_mode(int64_t value) { return std::string(reduce_name(static_cast<Reduce>(value))); }

// Read even from an undefined tensor, whose problem agree() reports first.
Agreed count_of(std::string_view what, const Tensor& t) { return {what, t.defined() ? t.numel() : 0}; }
Agreed dtype_of(const Tensor& t) { return {"dtype", t.defined() ? static_cast<int64_t>(t.dtype()) : 0, show_dtype}; }
Agreed mode_of(Reduce mode) { return {"reduce mode", static_cast<int64_t>(mode), show_mode}; }

// The first problem of several, "" when none.
// reduce_scatter's input and all_gather's output (the "whole") hold `world` parts the
// size of the other tensor, in its dtype.
std::string whole_and_part_problem(std::string_view op, const Tensor& input, const Tensor& output, bool input_is_whole,
                                   int world) {
  if (input.dtype() != output.dtype())
    return fmt::format("{}: the input is {} but the output {}", op, dtype_name(input.dtype()),
                       dtype_name(output.dtype()));
  const Tensor& whole = input_is_whole ? input : output;
  const Tensor& part = input_is_whole ? output : input;
  if (whole.numel() == world * part.numel()) return "";
  return fmt::format("{}: the {} has {} elements, not {} ranks x the {}'s {}", op, input_is_whole ? "input" : "output",
                     whole.numel(), world, input_is_whole ? "output" : "input", part.numel());
}

std::string first_of(std::initializer_list<std::string> problems) {
  for (const std::string& p : problems)
    if (!p.empty()) return p;
  return {};
}

// Set by an MPI launcher in every process it starts: Open MPI's mpirun, PMIx
// (Open MPI 5, srun --mpi=pmix), PMI (MPICH/Intel hydra, srun --mpi=pmi2). Not
// SLURM_PROCID: a batch script has it too, and one process there is no MPI job.
std::string_view mpi_launcher_variable() {
  for (std::string_view name : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE"})
    if (std::getenv(name.data()) != nullptr) return name;
  return {};
}

size_t bytes_of(const Tensor& t) { return static_cast<size_t>(t.numel()) * dtype_size(t.dtype()); }

// The exact algorithms work on host memory: a GPU tensor's copy there, and back.
Tensor on_host(const Tensor& t) {
  if (t.device().is_cpu()) return t;
  Tensor host = Tensor::empty(t.shape(), {t.dtype()});
  backend(t.device().type).copy(host.raw_data(), Device::cpu(), t.raw_data(), t.device(), bytes_of(t));
  return host;
}
void copy_back(const Tensor& host, Tensor& t) {
  if (!host.same(t))
    backend(t.device().type).copy(t.raw_data(), t.device(), host.raw_data(), Device::cpu(), bytes_of(t));
}

// Registered at load time, maybe before this file's globals exist (static
// libraries): built on first use.
struct Backends {
  std::mutex mutex;
  std::map<std::string, CommunicatorFactory, std::less<>> makers;
};
Backends& backends() {
  static Backends registry;
  return registry;
}

}  // namespace

namespace detail {

std::string tensor_problem(std::string_view op, std::string_view name, const Tensor& t, bool reduced, Device where) {
  if (!t.defined()) return fmt::format("{}: {} is an undefined tensor", op, name);
  if (t.device() != where)
    return fmt::format("{}: {} is on {}; this communicator's tensors must be on {}", op, name, t.device(), where);
  if (reduced && t.dtype() != DType::f32 && t.dtype() != DType::f64)
    return fmt::format("{}: {} has dtype {}; sums take float32 or float64 tensors", op, name, dtype_name(t.dtype()));
  if (!t.is_contiguous())
    return fmt::format("{}: {} of shape {} is not contiguous (strides {}); pass a contiguous copy", op, name, t.shape(),
                       t.strides());
  return {};
}

}  // namespace detail

std::string_view reduce_name(Reduce mode) { return mode == Reduce::exact ? "exact" : "fast"; }

// ---- every collective: its kind and sequence number agreed, its wait timed ----

namespace {

using Clock = std::chrono::steady_clock;

// The kinds every agreement compares; another op (a caller's agree()) is kind 0.
constexpr std::array<std::string_view, 8> kKinds = {"agree",      "all_reduce", "all_reduce_tree", "reduce_scatter",
                                                    "all_gather", "broadcast",  "barrier",         "sum_micro_batches"};
int64_t kind_of(std::string_view op) {
  const auto* it = std::find(kKinds.begin(), kKinds.end(), op);
  return it == kKinds.end() ? 0 : it - kKinds.begin();
}

double default_timeout() {
  const char* value = std::getenv("LOOM_COLLECTIVE_TIMEOUT");
  if (value == nullptr) return 30 * 60;
  char* end = nullptr;
  const double seconds = std::strtod(value, &end);
  LOOM_CHECK(end != value && *end == '\0' && seconds >= 0 && std::isfinite(seconds),
             "make_communicator: LOOM_COLLECTIVE_TIMEOUT is '{}', not a number of seconds >= 0 (0: no limit)", value);
  return seconds;
}

}  // namespace

// A thread that ends the job when a collective has waited past the timeout: started
// by the first collective timed (more than one rank, a timeout set).
struct Communicator::Watchdog {
  explicit Watchdog(Communicator& c) : comm(c), timeout(default_timeout()) {}
  Communicator& comm;
  std::mutex mutex;
  std::condition_variable changed;
  std::thread thread;
  double timeout;
  bool stop = false;
  int64_t started = 0;  // collectives started: the last one's sequence number
  int64_t running = 0;  // the sequence number of the one under way, 0 when none
  std::string op;
  Clock::time_point since;

  void watch() {
    std::unique_lock lock(mutex);
    while (!stop) {
      if (running == 0 || timeout <= 0) {
        changed.wait(lock);
        continue;
      }
      const int64_t watched = running;
      const auto deadline = since + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout));
      if (changed.wait_until(lock, deadline, [&] { return stop || running != watched; })) continue;
      const std::string why = fmt::format(
          "{} (collective #{} of this rank) has waited {:g} s for the other ranks: one of them has stopped or is in "
          "another collective (the limit: --collective-timeout, or LOOM_COLLECTIVE_TIMEOUT in seconds)",
          op, watched, timeout);
      lock.unlock();
      // The last resort, should the backend's abort wait on the stuck collective itself.
      std::thread([] {
        std::this_thread::sleep_for(std::chrono::seconds(30));
        std::_Exit(1);
      }).detach();
      comm.abort(1, why);
    }
  }
};

class Communicator::Collective {
 public:
  Collective(Communicator& comm, std::string_view op) : op(op), watchdog_(*comm.watchdog_) {
    {
      std::lock_guard lock(watchdog_.mutex);
      sequence = ++watchdog_.started;
      watchdog_.running = sequence;
      watchdog_.op = op;
      watchdog_.since = Clock::now();
      if (!watchdog_.thread.joinable() && watchdog_.timeout > 0 && comm.world_size() > 1)
        watchdog_.thread = std::thread([&watchdog = watchdog_] { watchdog.watch(); });
    }
    watchdog_.changed.notify_all();
  }
  ~Collective() {
    {
      std::lock_guard lock(watchdog_.mutex);
      watchdog_.running = 0;
    }
    watchdog_.changed.notify_all();
  }
  Collective(const Collective&) = delete;
  Collective& operator=(const Collective&) = delete;

  std::string_view op;
  int64_t sequence;

 private:
  Watchdog& watchdog_;
};

Communicator::Communicator() : watchdog_(std::make_unique<Watchdog>(*this)) {}

Communicator::~Communicator() {
  {
    std::lock_guard lock(watchdog_->mutex);
    watchdog_->stop = true;
  }
  watchdog_->changed.notify_all();
  if (watchdog_->thread.joinable()) watchdog_->thread.join();
}

void Communicator::set_timeout(double seconds) {
  LOOM_CHECK(seconds >= 0 && std::isfinite(seconds), "set_timeout: {} s; give seconds >= 0 (0: no limit)", seconds);
  {
    std::lock_guard lock(watchdog_->mutex);
    watchdog_->timeout = seconds;
  }
  watchdog_->changed.notify_all();
}

double Communicator::timeout() const {
  std::lock_guard lock(watchdog_->mutex);
  return watchdog_->timeout;
}

int64_t Communicator::collectives_started() const {
  std::lock_guard lock(watchdog_->mutex);
  return watchdog_->started;
}

void Communicator::agree(std::string_view op, std::string_view local_problem, std::span<const Agreed> values) {
  const Collective collective(*this, op);
  agree_in(collective, local_problem, values);
}

void Communicator::agree_in(const Collective& collective, std::string_view local_problem,
                            std::span<const Agreed> values) {
  // One max over ranks of [refusing rank + 1, sequence, -sequence, kind, -kind, count,
  // -count, v0, -v0, v1, -v1, ...] gives every rank the same view: who refused, and
  // each one's range. The first kInline values travel in a vector of one size for
  // every collective (ranks in different collectives must still meet in one all-reduce);
  // more, in a second one once the ranks agree on the count.
  constexpr size_t kInline = 6;
  const auto count = static_cast<int64_t>(values.size());
  const int64_t op = kind_of(collective.op);
  std::vector<int64_t> maxima{
      local_problem.empty() ? 0 : rank() + 1, collective.sequence, -collective.sequence, op, -op, count, -count};
  auto append = [&](std::vector<int64_t>& to, size_t from, size_t end) {
    for (size_t i = from; i < end; ++i) to.insert(to.end(), {values[i].value, -values[i].value});
  };
  append(maxima, 0, std::min(values.size(), kInline));
  maxima.resize(7 + 2 * kInline, 0);
  if (world_size() > 1) all_reduce_max(maxima);
  for (size_t i = 1; i < 7; i += 2)
    if (maxima[i] != -maxima[i + 1]) out_of_step(collective, op);
  if (values.size() > kInline) {
    std::vector<int64_t> rest;
    append(rest, kInline, values.size());
    if (world_size() > 1) all_reduce_max(rest);
    maxima.insert(maxima.end(), rest.begin(), rest.end());
  }
  if (!local_problem.empty()) throw Error(std::string(local_problem));
  LOOM_CHECK(maxima[0] == 0, "{}: rank {} refused its arguments (its own error says why)", collective.op,
             maxima[0] - 1);
  for (size_t i = 0; i < values.size(); ++i) {
    const Agreed& a = values[i];
    const int64_t high = maxima[7 + 2 * i], low = -maxima[8 + 2 * i];
    auto show = [&](int64_t v) { return a.show ? a.show(v) : std::to_string(v); };
    LOOM_CHECK(low == high, "{}: the ranks differ in {}: from {} to {}", collective.op, a.what, show(low), show(high));
  }
}

// Every rank gets here together (they all saw the difference): each names where it is.
void Communicator::out_of_step(const Collective& collective, int64_t op) {
  const int world = world_size();
  std::vector<int64_t> where(2 * static_cast<size_t>(world), std::numeric_limits<int64_t>::min());
  where[2 * rank()] = op;
  where[2 * rank() + 1] = collective.sequence;
  all_reduce_max(where);
  std::string ranks;
  constexpr int kNamed = 16;
  for (int r = 0; r < std::min(world, kNamed); ++r)
    ranks += fmt::format("{}rank {} in {} #{}", r == 0 ? "" : ", ", r, kKinds[where[2 * r]], where[2 * r + 1]);
  if (world > kNamed) ranks += ", ...";
  fail("{}: the ranks are out of step (each must run the same collectives in the same order): {}", collective.op,
       ranks);
}

void Communicator::all_reduce_sum(Tensor& t, Reduce mode) {
  constexpr std::string_view op = "all_reduce";
  const Collective collective(*this, op);
  agree_in(collective, detail::tensor_problem(op, "the tensor", t, true, device()),
           {count_of("element count", t), dtype_of(t), mode_of(mode)});
  KernelScope touches_memory;  // a collective reads and writes its tensors as a kernel does (a GPU's too)
  if (mode == Reduce::exact) {
    Tensor host = on_host(t);
    detail::exact_all_reduce(*this, std::span<const Tensor>(&host, 1), 1, host);
    copy_back(host, t);
  } else {
    all_reduce_sum_fast(t);
  }
}

void Communicator::all_reduce_tree(std::span<const Tensor> subtree_sums, int64_t micro_batches_per_rank, Tensor& out) {
  constexpr std::string_view op = "all_reduce_tree";
  const Collective collective(*this, op);
  std::string problem = detail::tensor_problem(op, "the output", out, true, device());
  const int64_t m = micro_batches_per_rank;
  if (problem.empty() && m < 1) problem = fmt::format("{}: {} micro-batches per rank", op, m);
  if (problem.empty()) {
    const auto expected = largest_subtrees(m * world_size(), {rank() * m, (rank() + 1) * m}).size();
    if (subtree_sums.size() != expected)
      problem = fmt::format("{}: rank {} holds {} subtree sums; its {} micro-batches of {} make {}", op, rank(),
                            subtree_sums.size(), m, m * world_size(), expected);
  }
  for (size_t j = 0; j < subtree_sums.size() && problem.empty(); ++j) {
    const Tensor& sum = subtree_sums[j];
    problem = detail::tensor_problem(op, fmt::format("subtree sum {}", j), sum, true, device());
    if (problem.empty() && (sum.numel() != out.numel() || sum.dtype() != out.dtype()))
      problem = fmt::format("{}: subtree sum {} is {} [{}], the output {} [{}]", op, j, dtype_name(sum.dtype()),
                            sum.numel(), dtype_name(out.dtype()), out.numel());
  }
  agree_in(collective, problem, {count_of("element count", out), dtype_of(out), {"micro-batches per rank", m}});
  KernelScope touches_memory;
  std::vector<Tensor> host;
  for (const Tensor& sum : subtree_sums) host.push_back(on_host(sum));
  Tensor host_out = on_host(out);
  detail::exact_all_reduce(*this, host, m, host_out);
  copy_back(host_out, out);
}

void Communicator::reduce_scatter_sum(const Tensor& input, Tensor& output, Reduce mode) {
  constexpr std::string_view op = "reduce_scatter";
  const Collective collective(*this, op);
  std::string problem = first_of({detail::tensor_problem(op, "the input", input, true, device()),
                                  detail::tensor_problem(op, "the output", output, true, device())});
  if (problem.empty()) problem = whole_and_part_problem(op, input, output, true, world_size());
  agree_in(collective, problem, {count_of("output element count", output), dtype_of(output), mode_of(mode)});
  KernelScope touches_memory;
  if (mode == Reduce::exact) {
    Tensor host_output = on_host(output);
    detail::exact_reduce_scatter(*this, on_host(input), host_output);
    copy_back(host_output, output);
  } else {
    reduce_scatter_sum_fast(input, output);
  }
}

void Communicator::all_gather(const Tensor& input, Tensor& output) {
  constexpr std::string_view op = "all_gather";
  const Collective collective(*this, op);
  std::string problem = first_of({detail::tensor_problem(op, "the input", input, false, device()),
                                  detail::tensor_problem(op, "the output", output, false, device())});
  if (problem.empty()) problem = whole_and_part_problem(op, input, output, false, world_size());
  agree_in(collective, problem, {count_of("input element count", input), dtype_of(input)});
  KernelScope touches_memory;
  all_gather_impl(input, output);
}

void Communicator::broadcast(Tensor& t, int root) {
  constexpr std::string_view op = "broadcast";
  const Collective collective(*this, op);
  std::string problem = detail::tensor_problem(op, "the tensor", t, false, device());
  if (problem.empty() && (root < 0 || root >= world_size()))
    problem = fmt::format("{}: root {} is not a rank of {}", op, root, world_size());
  agree_in(collective, problem, {count_of("element count", t), dtype_of(t), {"root", root}});
  KernelScope touches_memory;
  broadcast_impl(t, root);
}

// The agreement's all-reduce: no rank leaves it before every rank has come.
void Communicator::barrier() {
  const Collective collective(*this, "barrier");
  agree_in(collective, "", {});
}

Tensor sum_micro_batches(Communicator& comm, const std::vector<Tensor>& local_micro_batch_grads) {
  constexpr std::string_view op = "sum_micro_batches";
  const auto m = static_cast<int64_t>(local_micro_batch_grads.size());
  std::string problem;
  std::vector<Tensor> sums;
  if (local_micro_batch_grads.empty()) {
    problem = fmt::format("{}: rank {} holds no micro-batches", op, comm.rank());
  } else {
    try {  // a bad gradient must reach agree(), or the other ranks would wait for this one
      TreeAccumulator tree(m * comm.world_size(), {comm.rank() * m, (comm.rank() + 1) * m});
      for (const Tensor& g : local_micro_batch_grads) tree.add(g);
      sums = tree.subtree_sums();
    } catch (const Error& e) {
      problem = e.what();
    }
  }
  const Tensor first = sums.empty() ? Tensor() : sums.front();
  comm.agree(op, problem, {{"micro-batch count", m}, count_of("element count", first), dtype_of(first)});
  Tensor sum = Tensor::empty(first.shape(), {first.dtype()});
  comm.all_reduce_tree(sums, m, sum);
  return sum;
}

#ifdef LOOM_HAS_MPI
bool built_with_mpi() { return true; }
#else
bool built_with_mpi() { return false; }

std::unique_ptr<Communicator> detail::make_mpi_communicator() {
  fail("make_communicator: loom was built without MPI (scripts/setup installs Open MPI; then configure again)");
}
#endif

void register_communicator_backend(std::string_view name, CommunicatorFactory make) {
  std::lock_guard lock(backends().mutex);
  backends().makers[std::string(name)] = make;
}

namespace {
// The factory registered under `name`, or nullptr. A name not known yet may come with
// the CUDA layer (its nccl communicator registers itself as the layer loads).
CommunicatorFactory find_communicator_backend(std::string_view name) {
  auto lookup = [&]() -> CommunicatorFactory {
    std::lock_guard lock(backends().mutex);
    auto it = backends().makers.find(name);
    return it == backends().makers.end() ? nullptr : it->second;
  };
  if (CommunicatorFactory make = lookup()) return make;
  load_cuda_layer();
  return lookup();
}
}  // namespace

bool has_communicator_backend(std::string_view name) { return find_communicator_backend(name) != nullptr; }

std::unique_ptr<Communicator> make_communicator(std::string_view backend) {
  if (backend == "self") return detail::make_self_communicator();
  if (backend == "mpi") return detail::make_mpi_communicator();
  if (backend != "auto") {
    CommunicatorFactory make = find_communicator_backend(backend);
    if (make == nullptr) {
      std::string known = "auto, self, mpi";
      std::lock_guard lock(backends().mutex);
      for (const auto& [name, factory] : backends().makers) known += ", " + name;
      fail("make_communicator: unknown backend '{}' (this loom has: {}{})", backend, known,
           backend == "nccl" ? "; nccl comes with the CUDA layer built where CMake finds NCCL" : "");
    }
    return make();
  }
  const std::string_view launcher = mpi_launcher_variable();
  if (launcher.empty()) return detail::make_self_communicator();
  // Started by mpirun, yet without MPI every process would train alone as rank 0.
  LOOM_CHECK(built_with_mpi(),
             "make_communicator: started by an MPI launcher ({} is set) but loom was built without MPI "
             "(scripts/setup installs Open MPI; then configure again)",
             launcher);
  return detail::make_mpi_communicator();
}

}  // namespace loom::dist
