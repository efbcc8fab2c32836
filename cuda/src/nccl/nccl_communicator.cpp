// The "nccl" communicator (loom/dist/communicator.h): CUDA tensors through NCCL, one
// GPU per rank (its index among the ranks of its host). Built into the CUDA layer
// when CMake finds NCCL, registered at load time. The ranks are those of a host
// communicator ("mpi" under an MPI launcher, else "self": one rank), which carries
// what NCCL does not: rank 0's ncclUniqueId at start-up (as Marian and llm.c do) and
// the exact reduction, staged through host memory (tree_sum's bits at any world
// size). Fast sums and gathers are NCCL's own, queued on loom's stream of the GPU
// after the kernels that made their inputs. NCCL runs non-blocking: every wait polls
// its asynchronous error and gives up after the communicator's collective timeout,
// so a rank that died makes the others fail with an error, not hang.
#include <nccl.h>

#include <chrono>
#include <cstdlib>
#include <thread>

#include "loom/dist/communicator.h"
#include "loom/kernel_table.h"
#include "runtime.h"

namespace loom::cuda {

namespace {

void check_nccl(ncclResult_t result, std::string_view op, std::string_view call) {
  if (result != ncclSuccess && result != ncclInProgress)
    fail("{}: {} failed: {} ({})", op, call, ncclGetErrorString(result), ncclGetLastError(nullptr));
}

ncclDataType_t nccl_type(DType dtype) {
  switch (dtype) {
    case DType::f32: return ncclFloat32;
    case DType::f64: return ncclFloat64;
    case DType::i32: return ncclInt32;
    case DType::i64: return ncclInt64;
    case DType::b8: return ncclUint8;
    case DType::bf16: return ncclBfloat16;  // moved only: sums take float32/float64
  }
  fail("nccl: no NCCL type for dtype {}", dtype_name(dtype));
}

// This rank's index among the ranks on its host, as launchers set it.
int local_rank(int rank) {
  for (const char* name : {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID", "LOCAL_RANK"})
    if (const char* value = std::getenv(name)) return std::atoi(value);
  return rank;
}

class NcclCommunicator final : public dist::Communicator {
 public:
  NcclCommunicator() : host_(dist::make_communicator("auto")) {
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess) devices = 0;
    device_ = devices > 0 ? local_rank(host_->rank()) % devices : 0;
    host_->agree("make_communicator",
                 devices > 0 ? "" : "make_communicator: the nccl backend needs a GPU, and this process sees none", {});
    // Rank 0's id, to every rank.
    Tensor id = Tensor::empty({static_cast<int64_t>(sizeof(ncclUniqueId))}, {DType::b8});
    if (host_->rank() == 0)
      check_nccl(ncclGetUniqueId(static_cast<ncclUniqueId*>(id.raw_data())), "make_communicator", "ncclGetUniqueId");
    host_->broadcast(id, 0);
    DeviceGuard on(device_);
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    check_nccl(ncclCommInitRankConfig(&comm_, host_->world_size(), *static_cast<ncclUniqueId*>(id.raw_data()),
                                      host_->rank(), &config),
               "make_communicator", "ncclCommInitRankConfig");
    settle("make_communicator", "ncclCommInitRankConfig");
  }
  ~NcclCommunicator() override {
    if (comm_ != nullptr) ncclCommDestroy(comm_);
  }

  int rank() const override { return host_->rank(); }
  int world_size() const override { return host_->world_size(); }
  std::string_view backend_name() const override { return "nccl"; }
  Device device() const override { return Device::cuda(device_); }
  [[noreturn]] void abort(int code, std::string_view why) override {
    ncclCommAbort(comm_);
    comm_ = nullptr;
    host_->abort(code, why);
    std::_Exit(code);  // the host communicator's abort does not return
  }
  // Host memory, over the host communicator (the exact reduction's steps).
  void send_recv(int peer, const void* send, int64_t send_count, void* recv, int64_t recv_count, DType dtype) override {
    host_->send_recv(peer, send, send_count, recv, recv_count, dtype);
  }

 private:
  void all_reduce_max(std::span<int64_t> values) override {
    KernelScope touches_memory;  // agree() runs it outside a collective's scope
    Tensor on_gpu = Tensor::empty({static_cast<int64_t>(values.size())}, {DType::i64, device()});
    const size_t bytes = values.size_bytes();
    cudaStream_t s = stream(device_);
    LOOM_CUDA_CHECK(cudaMemcpyAsync(on_gpu.raw_data(), values.data(), bytes, cudaMemcpyHostToDevice, s));
    run("agree", "ncclAllReduce",
        ncclAllReduce(on_gpu.raw_data(), on_gpu.raw_data(), values.size(), ncclInt64, ncclMax, comm_, s));
    LOOM_CUDA_CHECK(cudaMemcpyAsync(values.data(), on_gpu.raw_data(), bytes, cudaMemcpyDeviceToHost, s));
    finish("agree");
  }
  void all_reduce_sum_fast(Tensor& t) override {
    run("all_reduce", "ncclAllReduce",
        ncclAllReduce(t.raw_data(), t.raw_data(), t.numel(), nccl_type(t.dtype()), ncclSum, comm_, stream(device_)));
    finish("all_reduce");
  }
  void reduce_scatter_sum_fast(const Tensor& input, Tensor& output) override {
    run("reduce_scatter", "ncclReduceScatter",
        ncclReduceScatter(input.raw_data(), output.raw_data(), output.numel(), nccl_type(output.dtype()), ncclSum,
                          comm_, stream(device_)));
    finish("reduce_scatter");
  }
  void all_gather_impl(const Tensor& input, Tensor& output) override {
    run("all_gather", "ncclAllGather",
        ncclAllGather(input.raw_data(), output.raw_data(), input.numel(), nccl_type(input.dtype()), comm_,
                      stream(device_)));
    finish("all_gather");
  }
  void broadcast_impl(Tensor& t, int root) override {
    run("broadcast", "ncclBroadcast",
        ncclBroadcast(t.raw_data(), t.raw_data(), t.numel(), nccl_type(t.dtype()), root, comm_, stream(device_)));
    finish("broadcast");
  }

  // A collective queued (or still being queued: non-blocking NCCL) on loom's stream.
  void run(std::string_view op, std::string_view call, ncclResult_t queued) {
    DeviceGuard on(device_);
    check_nccl(queued, op, call);
    settle(op, call);
  }
  // Waits for NCCL to leave ncclInProgress (initialisation, queuing).
  void settle(std::string_view op, std::string_view call) {
    wait_until(op, call, [&] { return true; });
  }
  // Waits for the stream: the collective and everything queued before it.
  void finish(std::string_view op) {
    wait_until(op, "the GPU's stream", [&] {
      const cudaError_t status = cudaStreamQuery(stream(device_));
      if (status == cudaErrorNotReady) return false;
      LOOM_CUDA_CHECK(status);
      return true;
    });
  }
  template <typename Done>
  void wait_until(std::string_view op, std::string_view what, Done done) {
    // The communicator's collective timeout (0: none), as its watchdog keeps it.
    const double limit = timeout();
    const auto deadline =
        limit > 0
            ? std::chrono::steady_clock::now() +
                  std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(limit))
            : std::chrono::steady_clock::time_point::max();
    for (;;) {
      ncclResult_t state = ncclSuccess;
      check_nccl(ncclCommGetAsyncError(comm_, &state), op, "ncclCommGetAsyncError");
      if (state != ncclSuccess && state != ncclInProgress) {
        ncclCommAbort(comm_);
        comm_ = nullptr;
        fail("{}: rank {}: NCCL failed while waiting for {}: {} (a rank died or left?)", op, rank(), what,
             ncclGetErrorString(state));
      }
      if (state == ncclSuccess && done()) return;
      if (std::chrono::steady_clock::now() > deadline) {
        ncclCommAbort(comm_);
        comm_ = nullptr;
        fail(
            "{}: rank {}: {} not done after {:g} s (--collective-timeout, LOOM_COLLECTIVE_TIMEOUT): another rank is "
            "gone or stuck",
            op, rank(), what, limit);
      }
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }

  std::unique_ptr<dist::Communicator> host_;
  int device_ = 0;
  ncclComm_t comm_ = nullptr;
};

const bool registered = [] {
  dist::register_communicator_backend(
      "nccl", []() -> std::unique_ptr<dist::Communicator> { return std::make_unique<NcclCommunicator>(); });
  return true;
}();

}  // namespace

}  // namespace loom::cuda
