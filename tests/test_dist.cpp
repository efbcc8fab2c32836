// dist: the tree sum's shape, the self backend, and the "ranks:" cases, which ctest
// runs again under mpiexec at 2 to 6 ranks: the exact all-reduce must give the bits
// of one process's tree_sum over all micro-batches at every world size.
#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "loom/backend.h"
#include "loom/autograd.h"
#include "loom/dist.h"
#include "loom/kernel_table.h"
#include "loom/standin.h"

using namespace loom;
using namespace loom::dist;

namespace {

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

template <typename T>
Tensor tensor_of(const std::vector<T>& values) {
  Tensor t = Tensor::empty({static_cast<int64_t>(values.size())}, {dtype_of<T>()});
  if (!values.empty()) std::memcpy(t.raw_data(), values.data(), values.size() * sizeof(T));
  return t;
}

// Values over 17 binades: the order of additions shows in the bits.
Tensor random_tensor(int64_t n, DType dtype, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> unit(-1.0, 1.0);
  std::uniform_int_distribution<int> exponent(-8, 8);
  std::vector<double> values(n);
  for (double& v : values) v = std::ldexp(unit(rng), exponent(rng));
  if (dtype == f64) return tensor_of(values);
  return tensor_of(std::vector<float>(values.begin(), values.end()));
}

// Micro-batch i's gradient, the same on every rank.
std::vector<Tensor> micro_batches(int64_t count, int64_t n, DType dtype) {
  std::vector<Tensor> grads;
  for (int64_t i = 0; i < count; ++i) grads.push_back(random_tensor(n, dtype, 1000 + i));
  return grads;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.numel() == b.numel() &&
         std::memcmp(a.raw_data(), b.raw_data(), a.numel() * dtype_size(a.dtype())) == 0;
}

template <typename T>
Tensor add(const Tensor& a, const Tensor& b) {
  std::vector<T> x = a.to_vector<T>(), y = b.to_vector<T>();
  for (size_t i = 0; i < x.size(); ++i) x[i] += y[i];
  return tensor_of(x);
}

// The tree as tree_sum.h describes it, written out recursively.
template <typename T>
Tensor reference_tree(const std::vector<Tensor>& g, size_t lo, size_t hi) {
  if (hi - lo == 1) return g[lo];
  const size_t mid = lo + (hi - lo + 1) / 2;
  return add<T>(reference_tree<T>(g, lo, mid), reference_tree<T>(g, mid, hi));
}

// The launcher's variables cleared for one scope, as in a plain process.
struct PlainProcess {
  std::vector<std::pair<std::string, std::string>> saved;
  PlainProcess() {
    for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE"}) {
      if (const char* value = std::getenv(name)) saved.emplace_back(name, value);
      unsetenv(name);
    }
  }
  ~PlainProcess() {
    for (const auto& [name, value] : saved) setenv(name.c_str(), value.c_str(), 1);
  }
};

const float kEps = std::ldexp(1.0f, -24);  // half an ulp of 1.0f: 1 + kEps rounds to 1

}  // namespace

TEST_CASE("tree_sum: left halves take the middle, and subtrees add before their parents") {
  auto sum_of = [](std::vector<float> values) {
    std::vector<Tensor> grads;
    for (float v : values) grads.push_back(tensor_of(std::vector<float>{v}));
    return tree_sum(grads).item<float>();
  };
  CHECK(sum_of({1.0f, kEps, kEps}) == 1.0f);                   // (1 + e) + e, not 1 + (e + e)
  CHECK(sum_of({1.0f, kEps, kEps, kEps}) == 1.0f + 2 * kEps);  // (1 + e) + (e + e), not a running sum
  CHECK(sum_of({kEps, kEps, 1.0f}) == 1.0f + 2 * kEps);
  for (size_t n = 1; n <= 13; ++n) {
    CAPTURE(n);
    const std::vector<Tensor> grads = micro_batches(n, 37, f32);
    CHECK(same_bits(tree_sum(grads), reference_tree<float>(grads, 0, n)));
  }
  const std::vector<Tensor> one = micro_batches(1, 5, f64);
  Tensor sum = tree_sum(one);
  CHECK(sum.raw_data() != one[0].raw_data());  // fresh storage, even for one micro-batch
  CHECK(same_bits(sum, one[0]));
}

TEST_CASE("tree_sum: a rank's block is its largest subtrees, and the tree above them gives tree_sum's bits") {
  // 3 ranks of 2: ((g0 + g1) + g2) + ((g3 + g4) + g5): rank 1's g2 and g3 sit in two subtrees.
  CHECK(largest_subtrees(6, {2, 4}) == std::vector<LeafRange>{{2, 3}, {3, 4}});
  CHECK(largest_subtrees(6, {0, 2}) == std::vector<LeafRange>{{0, 2}});
  CHECK(largest_subtrees(8, {4, 6}) == std::vector<LeafRange>{{4, 6}});  // a power of two: one subtree each
  CHECK(largest_subtrees(7, {0, 7}) == std::vector<LeafRange>{{0, 7}});
  for (int64_t per_rank : {1, 2, 3, 5}) {
    for (int ranks : {2, 3, 4, 5, 6, 8}) {
      CAPTURE(per_rank);
      CAPTURE(ranks);
      const int64_t count = per_rank * ranks;
      const std::vector<Tensor> grads = micro_batches(count, 101, f32);
      // Each rank's subtree sums, as its accumulator makes them; then the tree above them.
      std::vector<std::pair<LeafRange, Tensor>> leaves;
      for (int r = 0; r < ranks; ++r) {
        const LeafRange block{r * per_rank, (r + 1) * per_rank};
        TreeAccumulator mine(count, block);
        for (int64_t g = block.lo; g < block.hi; ++g) mine.add(grads[g]);
        const std::vector<LeafRange> ranges = largest_subtrees(count, block);
        const std::vector<Tensor> sums = mine.subtree_sums();
        REQUIRE(sums.size() == ranges.size());
        CHECK(ranges.front().lo == block.lo);
        CHECK(ranges.back().hi == block.hi);
        if (std::has_single_bit(static_cast<unsigned>(ranks))) CHECK(ranges.size() == 1);
        for (size_t j = 0; j < sums.size(); ++j) {
          CHECK(same_bits(sums[j], reference_tree<float>(grads, ranges[j].lo, ranges[j].hi)));
          leaves.emplace_back(ranges[j], sums[j]);
        }
      }
      const std::function<Tensor(int64_t, int64_t)> above = [&](int64_t lo, int64_t hi) {
        for (const auto& [range, sum] : leaves)
          if (range == LeafRange{lo, hi}) return sum;
        const int64_t mid = lo + (hi - lo + 1) / 2;
        return add<float>(above(lo, mid), above(mid, hi));
      };
      CHECK(same_bits(above(0, count), tree_sum(grads)));
    }
  }
}

TEST_CASE("tree_sum: the accumulator reads each gradient during add() only") {
  const std::vector<Tensor> grads = micro_batches(7, 64, f64);
  TreeAccumulator sum(7);
  Tensor buffer = Tensor::empty({64}, {f64});  // reused for every micro-batch, as a gradient buffer is
  for (const Tensor& g : grads) {
    std::memcpy(buffer.raw_data(), g.raw_data(), 64 * sizeof(double));
    sum.add(buffer);
    CHECK(sum.added() <= sum.count());
  }
  CHECK(same_bits(sum.result(), tree_sum(grads)));
  CHECK(error_of([&] { sum.result(); }) == "tree_sum: the sum was already taken");
}

TEST_CASE("tree_sum: the last micro-batch finished in pieces has the bits of add() and result()") {
  for (int64_t count = 1; count <= 7; ++count) {
    CAPTURE(count);
    const std::vector<Tensor> grads = micro_batches(count, 50, f32);
    TreeAccumulator sum(count);
    for (int64_t i = 0; i + 1 < count; ++i) sum.add(grads[i]);
    Tensor last = tensor_of(grads.back().to_vector<float>());  // finished in place, as GradientReducer does
    for (auto [begin, n] : {std::pair<int64_t, int64_t>{0, 17}, {17, 33}}) {
      Tensor piece = Tensor::make_view(last, {n}, {1}, begin);
      sum.finish_range(piece, begin, piece);
    }
    CHECK(same_bits(last, tree_sum(grads)));
  }
  // A rank's block of a tree: the pieces of each subtree sum, the last one's in place.
  const std::vector<Tensor> grads = micro_batches(6, 50, f64);
  for (LeafRange block : {LeafRange{2, 4}, LeafRange{4, 6}, LeafRange{1, 6}}) {
    CAPTURE(block.lo);
    TreeAccumulator mine(6, block), whole(6, block);
    for (int64_t g = block.lo; g < block.hi; ++g) whole.add(grads[g]);
    for (int64_t g = block.lo; g + 1 < block.hi; ++g) mine.add(grads[g]);
    const std::vector<Tensor> expected = whole.subtree_sums();
    Tensor last = tensor_of(grads[block.hi - 1].to_vector<double>());
    for (auto [begin, n] : {std::pair<int64_t, int64_t>{0, 20}, {20, 30}}) {
      Tensor piece = Tensor::make_view(last, {n}, {1}, begin);
      const std::vector<Tensor> sums = mine.finish_range(piece, begin, piece);
      REQUIRE(sums.size() == expected.size());
      CHECK(sums.back().raw_data() == piece.raw_data());
      for (size_t j = 0; j < sums.size(); ++j)
        CHECK(same_bits(sums[j], Tensor::make_view(expected[j], {n}, {1}, begin)));
    }
  }
  TreeAccumulator early(3);
  early.add(random_tensor(4, f32, 1));
  Tensor piece = random_tensor(4, f32, 2);
  CHECK(error_of([&] { early.finish_range(piece, 0, piece); }) ==
        "tree_sum: a range of the last micro-batch after 1 of 3 micro-batches");
}

TEST_CASE("tree_sum: refusals name the op and the micro-batch") {
  CHECK(error_of([] { tree_sum({}); }) == "tree_sum: no micro-batch gradients");
  CHECK(error_of([] {
          tree_sum({tensor_of(std::vector<int32_t>{1, 2})});
        }) == "tree_sum: micro-batch 0 has dtype int32; sums take float32 or float64 tensors");
  CHECK(error_of([] {
          tree_sum({tensor_of(std::vector<float>{1, 2}), tensor_of(std::vector<float>{1, 2, 3})});
        }) == "tree_sum: micro-batch 1 is float32 [3], the ones before it float32 [2]");
  CHECK(error_of([] {
          tree_sum({tensor_of(std::vector<float>{1}), tensor_of(std::vector<double>{1})});
        }) == "tree_sum: micro-batch 1 is float64 [1], the ones before it float32 [1]");
  Tensor transposed = Tensor::make_view(random_tensor(6, f32, 1), {3, 2}, {1, 3}, 0);
  CHECK(error_of([&] { tree_sum({transposed}); }) ==
        "tree_sum: micro-batch 0 of shape [3, 2] is not contiguous (strides [1, 3]); pass a contiguous copy");
  TreeAccumulator two(2);
  two.add(tensor_of(std::vector<float>{1}));
  CHECK(error_of([&] { two.result(); }) == "tree_sum: 1 of 2 micro-batches added");
  two.add(tensor_of(std::vector<float>{1}));
  CHECK(error_of([&] { two.add(tensor_of(std::vector<float>{1})); }) == "tree_sum: micro-batch 3 added to a sum of 2");
  CHECK(error_of([] { TreeAccumulator none(0); }) == "tree_sum: needs at least one micro-batch, not 0");
}

TEST_CASE("self: one process, rank 0 of 1; sums are the tensor, gathers copies") {
  auto comm = make_communicator("self");
  CHECK(comm->backend_name() == "self");
  CHECK(comm->rank() == 0);
  CHECK(comm->world_size() == 1);
  Tensor t = random_tensor(9, f32, 7), before = random_tensor(9, f32, 7);
  comm->all_reduce_sum(t);
  comm->all_reduce_sum(t, Reduce::fast);
  CHECK(same_bits(t, before));
  Tensor out = Tensor::empty({9}, {f32});
  comm->reduce_scatter_sum(t, out);
  CHECK(same_bits(out, before));
  Tensor ids = tensor_of(std::vector<int64_t>{4, 5, 6}), gathered = Tensor::empty({3}, {i64});
  comm->all_gather(ids, gathered);
  CHECK(same_bits(ids, gathered));
  comm->broadcast(ids, 0);
  comm->barrier();
  CHECK(error_of([&] { comm->broadcast(ids, 1); }) == "broadcast: root 1 is not a rank of 1");
  CHECK(error_of([&] { comm->send_recv(1, nullptr, 0, nullptr, 0, f32); }) ==
        "send_recv: rank 1 does not exist in a one-process run");
}

TEST_CASE("self: the collective timeout: 30 minutes, LOOM_COLLECTIVE_TIMEOUT or set_timeout; a bad value named") {
  CHECK(make_communicator("self")->timeout() == 1800);
  setenv("LOOM_COLLECTIVE_TIMEOUT", "2.5", 1);
  auto comm = make_communicator("self");
  CHECK(comm->timeout() == 2.5);
  comm->set_timeout(0.001);  // one process: nothing to wait for, never timed
  Tensor t = tensor_of(std::vector<float>{1, 2});
  comm->all_reduce_sum(t);
  CHECK(comm->collectives_started() == 1);
  CHECK(error_of([&] { comm->set_timeout(-1); }) == "set_timeout: -1 s; give seconds >= 0 (0: no limit)");
  setenv("LOOM_COLLECTIVE_TIMEOUT", "ten", 1);
  CHECK(error_of([] { make_communicator("self"); }) ==
        "make_communicator: LOOM_COLLECTIVE_TIMEOUT is 'ten', not a number of seconds >= 0 (0: no limit)");
  unsetenv("LOOM_COLLECTIVE_TIMEOUT");
}

// ctest's dist_watchdog runs this at 2 ranks and expects rank 0's abort message.
TEST_CASE("watchdog: a collective that waits past the timeout ends the job, naming itself") {
  auto comm = make_communicator("auto");
  comm->set_timeout(1);
  if (comm->world_size() == 1) return;  // one process: never timed
  if (comm->rank() == 0) {
    Tensor t = tensor_of(std::vector<float>{1, 2});
    comm->all_reduce_sum(t);  // rank 1 never comes
    FAIL("the all-reduce returned without rank 1");
  } else {
    std::this_thread::sleep_for(std::chrono::seconds(60));
  }
}

// A one-rank communicator whose tensors live on the stand-in device, whose memory only
// kernels may touch: what the nccl backend is to a GPU, checkable without one.
class StandinCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  std::string_view backend_name() const override { return "standin"; }
  Device device() const override { return Device::standin(0); }
  [[noreturn]] void abort(int code, std::string_view) override { std::_Exit(code); }
  void send_recv(int, const void*, int64_t, void*, int64_t, DType) override { fail("send_recv: one rank"); }

 private:
  void all_reduce_max(std::span<int64_t>) override {}
  void all_reduce_sum_fast(Tensor&) override {}
  void reduce_scatter_sum_fast(const Tensor& input, Tensor& output) override { copy(input, output); }
  void all_gather_impl(const Tensor& input, Tensor& output) override { copy(input, output); }
  void broadcast_impl(Tensor&, int) override {}
  static void copy(const Tensor& from, const Tensor& to) {
    backend(DeviceType::standin)
        .copy(to.raw_data(), to.device(), from.raw_data(), from.device(),
              static_cast<size_t>(from.numel()) * dtype_size(from.dtype()));
  }
};

TEST_CASE("a communicator of device tensors: collectives touch their memory as kernels, exact sums via the host") {
  enable_standin_device();
  StandinCommunicator comm;
  const Tensor x = tensor_of<float>({1.5f, -2.0f, 3.25f});
  // Copies through the Backend, as loom's copy kernel makes them.
  auto copy = [](const Tensor& from, const Tensor& to) {
    KernelScope touches_memory;
    backend(DeviceType::standin)
        .copy(to.raw_data(), to.device(), from.raw_data(), from.device(), from.numel() * sizeof(float));
  };
  auto on_standin = [&](const Tensor& t) {
    Tensor d = Tensor::empty(t.shape(), {t.dtype(), Device::standin(0)});
    copy(t, d);
    return d;
  };
  auto on_cpu = [&](const Tensor& d) {
    Tensor t = Tensor::empty(d.shape(), {d.dtype()});
    copy(d, t);
    return std::vector<float>(t.data<float>(), t.data<float>() + t.numel());
  };
  const std::vector<float> want = on_cpu(on_standin(x));
  for (Reduce mode : {Reduce::exact, Reduce::fast}) {
    Tensor t = on_standin(x), part = on_standin(tensor_of<float>({0, 0, 0}));
    comm.all_reduce_sum(t, mode);
    CHECK(on_cpu(t) == want);
    comm.reduce_scatter_sum(t, part, mode);
    CHECK(on_cpu(part) == want);
  }
  Tensor gathered = on_standin(tensor_of<float>({0, 0, 0}));
  comm.all_gather(on_standin(x), gathered);
  CHECK(on_cpu(gathered) == want);
  Tensor cpu_tensor = tensor_of<float>({1, 2});
  CHECK(error_of([&] { comm.all_reduce_sum(cpu_tensor); }) ==
        "all_reduce: the tensor is on cpu; this communicator's tensors must be on standin:0");
}

TEST_CASE("make_communicator: a plain process gets self through auto, and never starts MPI") {
  PlainProcess plain;
  auto comm = make_communicator("auto");
  CHECK(comm->backend_name() == "self");
  CHECK(comm->world_size() == 1);
  CHECK(make_communicator()->backend_name() == "self");
  CHECK(error_of([] {
          make_communicator("gloo");
        }).starts_with("make_communicator: unknown backend 'gloo' (this loom has: auto, self, mpi"));
  if (!built_with_mpi()) {
    CHECK(error_of([] { make_communicator("mpi"); }) ==
          "make_communicator: loom was built without MPI (scripts/setup installs Open MPI; then configure again)");
  }
}

// ---- the cases ctest also runs under mpiexec ----

TEST_CASE("ranks: the exact all-reduce has the bits of one process's tree_sum, at any world size") {
  auto comm = make_communicator("auto");
  const int rank = comm->rank(), world = comm->world_size();
  MESSAGE("backend ", comm->backend_name(), ", rank ", rank, " of ", world);
  for (DType dtype : {f32, f64}) {
    for (int64_t per_rank : {1, 2, 3}) {  // 2 at 3 ranks: subtrees straddle ranks
      for (int64_t n : {10007, 3, 0}) {   // more, fewer and no elements than ranks
        CAPTURE(dtype_name(dtype));
        CAPTURE(per_rank);
        CAPTURE(n);
        const int64_t total = per_rank * world;
        const std::vector<Tensor> all = micro_batches(total, n, dtype);
        const Tensor expected = tree_sum(all);
        const std::vector<Tensor> mine(all.begin() + rank * per_rank, all.begin() + (rank + 1) * per_rank);
        CHECK(same_bits(sum_micro_batches(*comm, mine), expected));
        // The same in two calls: the rank's subtrees, then all_reduce_tree into the last.
        TreeAccumulator tree(total, {rank * per_rank, (rank + 1) * per_rank});
        for (const Tensor& g : mine) tree.add(g);
        std::vector<Tensor> sums = tree.subtree_sums();
        comm->all_reduce_tree(sums, per_rank, sums.back());
        CHECK(same_bits(sums.back(), expected));
        // all_reduce_sum's exact mode: the tree over ranks of each rank's own sum.
        std::vector<Tensor> rank_sums;
        for (int r = 0; r < world; ++r)
          rank_sums.push_back(tree_sum({all.begin() + r * per_rank, all.begin() + (r + 1) * per_rank}));
        Tensor local = tree_sum(mine);
        comm->all_reduce_sum(local);
        CHECK(same_bits(local, tree_sum(rank_sums)));
        // The library's own order: close, not necessarily the same bits.
        Tensor fast = tree_sum(mine);
        comm->all_reduce_sum(fast, Reduce::fast);
        // Two orders of `total` additions differ by at most 2 (total - 1) rounding errors
        // of the sum of magnitudes (Higham's bound for recursive summation, twice).
        const std::vector<double> a = fast.to_vector<double>(), b = expected.to_vector<double>();
        std::vector<double> magnitude(a.size());
        for (const Tensor& g : all) {
          const std::vector<double> v = g.to_vector<double>();
          for (size_t i = 0; i < v.size(); ++i) magnitude[i] += std::abs(v[i]);
        }
        const double unit = dtype == f32 ? std::ldexp(1.0, -24) : std::ldexp(1.0, -53);
        double worst = 0;
        for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(a[i] - b[i]) / magnitude[i]);
        CHECK(worst <= 2 * (total - 1) * unit * 1.01);
        if (n > 1000 && dtype == f32 && total >= 4) {  // the order shows in the bits (3: the same order)
          Tensor running = all[0];
          for (int64_t i = 1; i < total; ++i) running = add<float>(running, all[i]);
          CHECK_FALSE(same_bits(running, expected));
        }
      }
    }
  }
}

TEST_CASE("ranks: reduce_scatter gives each rank its chunk of the exact all-reduce") {
  auto comm = make_communicator("auto");
  const int rank = comm->rank(), world = comm->world_size();
  for (int64_t chunk : {1000, 1}) {
    CAPTURE(chunk);
    const Tensor input = random_tensor(chunk * world, f32, 50 + rank);
    Tensor everything = random_tensor(chunk * world, f32, 50 + rank);
    comm->all_reduce_sum(everything);
    Tensor out = Tensor::empty({chunk}, {f32});
    comm->reduce_scatter_sum(input, out);
    CHECK(std::memcmp(out.raw_data(), everything.data<float>() + rank * chunk, chunk * sizeof(float)) == 0);
    comm->reduce_scatter_sum(input, out, Reduce::fast);
    float worst = 0;
    for (int64_t i = 0; i < chunk; ++i)
      worst = std::max(worst, std::abs(out.data<float>()[i] - everything.data<float>()[rank * chunk + i]));
    CHECK(worst <= 1e-4f);
  }
  // Integers are exact in any order: rank q contributes q * 1000 + i at element i.
  std::vector<double> values(3 * world);
  for (size_t i = 0; i < values.size(); ++i) values[i] = rank * 1000.0 + i;
  Tensor out = Tensor::empty({3}, {f64});
  comm->reduce_scatter_sum(tensor_of(values), out);
  for (int i = 0; i < 3; ++i) CHECK(out.data<double>()[i] == 1000.0 * world * (world - 1) / 2 + world * (rank * 3 + i));
}

TEST_CASE("ranks: broadcast and all_gather move every dtype") {
  auto comm = make_communicator("auto");
  const int rank = comm->rank(), world = comm->world_size();
  Tensor seed = tensor_of(std::vector<int64_t>{rank, 100 + rank, -rank});
  comm->broadcast(seed, world - 1);
  CHECK(seed.to_vector<int64_t>() == std::vector<int64_t>{world - 1, 100 + world - 1, 1 - world});
  Tensor weights = random_tensor(257, f32, 9 + rank);
  comm->broadcast(weights, 0);
  CHECK(same_bits(weights, random_tensor(257, f32, 9)));

  Tensor mine = tensor_of(std::vector<int32_t>{rank, 10 * rank}), all = Tensor::empty({2 * world}, {i32});
  comm->all_gather(mine, all);
  for (int r = 0; r < world; ++r) {
    CHECK(all.data<int32_t>()[2 * r] == r);
    CHECK(all.data<int32_t>()[2 * r + 1] == 10 * r);
  }
  Tensor shard = random_tensor(33, f64, 70 + rank), full = Tensor::empty({33 * world}, {f64});
  comm->all_gather(shard, full);
  for (int r = 0; r < world; ++r)
    CHECK(std::memcmp(full.data<double>() + 33 * r, random_tensor(33, f64, 70 + r).raw_data(), 33 * 8) == 0);
}

TEST_CASE("ranks: wrong arguments are named errors on every rank, and the ranks go on") {
  auto comm = make_communicator("auto");
  const int rank = comm->rank(), world = comm->world_size();
  Tensor ints = tensor_of(std::vector<int32_t>{1, 2, 3});
  CHECK(error_of([&] { comm->all_reduce_sum(ints); }) ==
        "all_reduce: the tensor has dtype int32; sums take float32 or float64 tensors");
  Tensor small = Tensor::empty({5}, {f32});
  CHECK(error_of([&] { comm->reduce_scatter_sum(random_tensor(5 * world + 1, f32, 1), small); }) ==
        fmt::format("reduce_scatter: the input has {} elements, not {} ranks x the output's 5", 5 * world + 1, world));
  CHECK(error_of([&] { comm->all_gather(small, small); }).starts_with(world == 1 ? "(no error)" : "all_gather: "));
  CHECK(error_of([&] { comm->broadcast(small, world); }) ==
        fmt::format("broadcast: root {} is not a rank of {}", world, world));
  if (world > 1) {
    Tensor uneven = random_tensor(10 + rank, f32, 3);
    CHECK(error_of([&] { comm->all_reduce_sum(uneven); }) ==
          fmt::format("all_reduce: the ranks differ in element count: from 10 to {}", 9 + world));
    // One rank's bad tensor: it names its own problem, the others name the rank.
    Tensor odd = rank == 1 ? ints : random_tensor(3, f32, 3);
    const std::string expected = rank == 1
                                     ? "all_reduce: the tensor has dtype int32; sums take float32 or float64 tensors"
                                     : "all_reduce: rank 1 refused its arguments (its own error says why)";
    CHECK(error_of([&] { comm->all_reduce_sum(odd); }) == expected);
    const std::vector<Tensor> grads = micro_batches(rank == 0 ? 2 : 1, 4, f32);
    CHECK(error_of([&] { sum_micro_batches(*comm, grads); }) ==
          fmt::format("sum_micro_batches: the ranks differ in micro-batch count: from 1 to 2"));
    Tensor t = random_tensor(4, f32, 3);
    CHECK(error_of([&] { comm->all_reduce_sum(t, rank == 0 ? Reduce::fast : Reduce::exact); }) ==
          "all_reduce: the ranks differ in reduce mode: from exact to fast");
  }
  // Still in step: a sum after the refusals.
  Tensor ones = tensor_of(std::vector<double>(5, 1.0));
  comm->all_reduce_sum(ones, Reduce::fast);
  CHECK(ones.to_vector<double>() == std::vector<double>(5, world));
  comm->barrier();
}

TEST_CASE("ranks: ranks in different collectives are named, each in its own, and go on") {
  auto comm = make_communicator("auto");
  const int rank = comm->rank(), world = comm->world_size();
  Tensor t = tensor_of(std::vector<float>(4, 1.0f));
  const int64_t next = comm->collectives_started() + 1;
  // Rank 0 sums while the others broadcast the same tensor from rank 0: count, dtype
  // and a 0 (exact mode, root 0) agree, so before kinds were compared this summed on
  // one side and broadcast on the other.
  const std::string error = error_of([&] {
    if (rank == 0) {
      comm->all_reduce_sum(t);
    } else {
      comm->broadcast(t, 0);
    }
  });
  if (world > 1) {
    std::string where = fmt::format("rank 0 in all_reduce #{}", next);
    for (int r = 1; r < world; ++r) where += fmt::format(", rank {} in broadcast #{}", r, next);
    CHECK(error ==
          fmt::format("{}: the ranks are out of step (each must run the same collectives in the same order): {}",
                      rank == 0 ? "all_reduce" : "broadcast", where));
  } else {
    CHECK(error == "(no error)");
  }
  CHECK(comm->collectives_started() == next);
  comm->barrier();
  Tensor ones = tensor_of(std::vector<double>(3, 1.0));
  comm->all_reduce_sum(ones);
  CHECK(ones.to_vector<double>() == std::vector<double>(3, world));
  CHECK(comm->collectives_started() == next + 2);
}

TEST_CASE("ranks: all_reduce_tree names a rank's wrong subtree sums; the ranks go on") {
  auto comm = make_communicator("auto");
  const int rank = comm->rank(), world = comm->world_size();
  const int64_t per_rank = 2;
  TreeAccumulator tree(per_rank * world, {rank * per_rank, (rank + 1) * per_rank});
  for (const Tensor& g : micro_batches(per_rank, 5, f32)) tree.add(g);
  std::vector<Tensor> sums = tree.subtree_sums();
  const size_t held = sums.size();
  std::vector<Tensor> one_more = sums;
  one_more.push_back(sums.back());
  const std::string error =
      error_of([&] { comm->all_reduce_tree(rank == 0 ? one_more : sums, per_rank, sums.back()); });
  if (rank == 0) {
    CHECK(error == fmt::format("all_reduce_tree: rank 0 holds {} subtree sums; its 2 micro-batches of {} make {}",
                               held + 1, 2 * world, held));
  } else {
    CHECK(error == "all_reduce_tree: rank 0 refused its arguments (its own error says why)");
  }
  Tensor ones = tensor_of(std::vector<float>(7, 1.0f));
  comm->all_reduce_sum(ones);
  CHECK(ones.to_vector<float>() == std::vector<float>(7, static_cast<float>(world)));
}

namespace {

// Parameters of several sizes; micro-batch g's gradient of parameter k is random,
// except that odd micro-batches never reach parameter 2 (it gets zeros from them).
const std::vector<int64_t> kParameterSizes = {7, 300, 1, 5000, 64};
Tensor micro_batch_gradient(int64_t g, size_t k) {
  if (k == 2 && g % 2 == 1) return Tensor();
  return random_tensor(kParameterSizes[k], f32, 7000 + 10 * static_cast<uint64_t>(g) + k);
}
Tensor flat_gradient(int64_t g) {  // what the reducer should collect from micro-batch g
  std::vector<float> flat;
  for (size_t k = 0; k < kParameterSizes.size(); ++k) {
    const Tensor grad = micro_batch_gradient(g, k);
    const std::vector<float> part = grad.defined() ? grad.to_vector<float>() : std::vector<float>(kParameterSizes[k]);
    flat.insert(flat.end(), part.begin(), part.end());
  }
  return tensor_of(flat);
}

// Backward through one recorded node whose gradients are micro-batch g's, on the parameters' device.
void backward_of_micro_batch(const std::vector<Tensor>& params, int64_t g) {
  const Device device = params.front().device();
  std::vector<Tensor> inputs;
  std::vector<size_t> reached;
  for (size_t k = 0; k < params.size(); ++k)
    if (micro_batch_gradient(g, k).defined()) inputs.push_back(params[k]), reached.push_back(k);
  Tensor out = record("micro_batch", inputs, Tensor::empty({1}, {f32, device}),
                      [g, reached, device](BackwardContext&, const Tensor&) {
                        std::vector<Tensor> grads;
                        for (size_t k : reached) grads.push_back(transfer(micro_batch_gradient(g, k), device));
                        return grads;
                      });
  out.backward();
  for (const Tensor& p : params) p.set_grad(Tensor());
}

}  // namespace

TEST_CASE("ranks: GradientReducer sums the hooked gradients in buckets with tree_sum's bits, overlapped or not") {
  auto comm = make_communicator("auto");
  const int rank = comm->rank(), world = comm->world_size();
  std::vector<Tensor> params;
  for (int64_t n : kParameterSizes) params.push_back(Tensor::empty({n}, {f32}).requires_grad_());
  for (int64_t per_rank : {1, 2, 5}) {  // 5: two partial sums before the last micro-batch
    const int64_t total = per_rank * world;
    // With several, the update's last micro-batch is missing (an epoch's end): its rank adds zeros.
    auto missing = [&](int64_t g) { return total > 1 && g == total - 1; };
    std::vector<Tensor> all;
    for (int64_t g = 0; g < total; ++g)
      all.push_back(missing(g) ? tensor_of(std::vector<float>(flat_gradient(0).numel())) : flat_gradient(g));
    const Tensor expected = tree_sum(all);
    for (int64_t bucket_bytes : {int64_t{1}, int64_t{1300}, int64_t{25} << 20}) {
      for (bool overlap : {true, false}) {
        CAPTURE(per_rank);
        CAPTURE(bucket_bytes);
        CAPTURE(overlap);
        GradientReducer reducer(*comm, params, per_rank, {.bucket_bytes = bucket_bytes, .overlap = overlap});
        // Whole parameters, the last first: 1300 bytes make {64}, {5000}, {7, 300, 1}.
        CHECK(reducer.bucket_count() == (bucket_bytes == 1 ? 5 : bucket_bytes == 1300 ? 3 : 1));
        CHECK(reducer.overlaps() == overlap);
        for (int update = 0; update < 2; ++update) {  // the reducer starts each update afresh
          for (int64_t i = 0; i < per_rank; ++i) {
            const int64_t g = rank * per_rank + i;
            reducer.begin_micro_batch();
            if (!missing(g)) backward_of_micro_batch(params, g);
            reducer.end_micro_batch();
          }
          CHECK(same_bits(reducer.finish(), expected));
          CHECK(reducer.communication_seconds() >= 0);
          CHECK(reducer.exposed_seconds() >= 0);
        }
      }
    }
  }
  // Outside a micro-batch the hooks do nothing, and a reducer gone leaves the parameters trainable.
  { GradientReducer gone(*comm, params, 1); }
  backward_of_micro_batch(params, 0);
  GradientReducer reducer(*comm, params, 1);
  CHECK(error_of([&] { reducer.finish(); }) ==
        "GradientReducer: finish() before the end of the update's micro-batches (1 per update)");
}

TEST_CASE("a GradientReducer of device parameters: gradients copied as kernels, summed after backward, via the host") {
  enable_standin_device();
  StandinCommunicator comm;
  std::vector<Tensor> params;
  for (int64_t n : kParameterSizes) params.push_back(Tensor::empty({n}, {f32, Device::standin(0)}).requires_grad_());
  for (int64_t per_rank : {1, 5}) {
    CAPTURE(per_rank);
    std::vector<Tensor> all;
    for (int64_t g = 0; g < per_rank; ++g) all.push_back(flat_gradient(g));
    GradientReducer reducer(comm, params, per_rank, {.bucket_bytes = 1300});
    CHECK_FALSE(reducer.overlaps());  // the communication thread is for host communicators
    for (int64_t g = 0; g < per_rank; ++g) {
      reducer.begin_micro_batch();
      backward_of_micro_batch(params, g);
      reducer.end_micro_batch();
    }
    const Tensor sum = reducer.finish();
    CHECK(sum.device() == Device::standin(0));
    CHECK(same_bits(transfer(sum, Device::cpu()), tree_sum(all)));
  }
}
