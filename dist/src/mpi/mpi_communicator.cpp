// The "mpi" backend: CPU tensors over MPI's C API (Open MPI). Compiled only when
// CMake finds MPI. MPI is initialised by the first communicator (unless the program
// did it) and finalised at exit; each communicator works on its own duplicate of
// MPI_COMM_WORLD, with errors returned (not fatal) and thrown as loom::Error.
#include <mpi.h>

#include <climits>
#include <cstdio>
#include <cstdlib>

#include "../dist_internal.h"

namespace loom::dist::detail {

namespace {

void check_mpi(int code, std::string_view op, std::string_view call) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  fail("{}: {} failed: {}", op, call, std::string_view(text, length));
}

int mpi_count(std::string_view op, int64_t count) {
  LOOM_CHECK(count <= INT_MAX, "{}: {} elements are more than one MPI call takes ({})", op, count, INT_MAX);
  return static_cast<int>(count);
}

// Exact-width types: any dtype moves, the float ones add.
MPI_Datatype mpi_type(DType dtype) {
  switch (dtype) {
    case DType::f32: return MPI_FLOAT;
    case DType::f64: return MPI_DOUBLE;
    case DType::i32: return MPI_INT32_T;
    case DType::i64: return MPI_INT64_T;
    case DType::b8: return MPI_UINT8_T;
    case DType::bf16: return MPI_UINT16_T;
  }
  fail("mpi: no MPI type for dtype {}", dtype_name(dtype));
}

void finalize_at_exit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

// MPI_THREAD_SERIALIZED: one thread at a time calls MPI (the main thread, or
// GradientReducer's communication thread while the main one waits); OpenMP threads
// compute. An MPI that gives only MPI_THREAD_FUNNELED keeps every call on the main
// thread. Returns the level provided.
int initialize_once() {
  static const int provided = [] {
    int already = 0, level = 0;
    MPI_Initialized(&already);
    if (already) {  // the program's own MPI: it finalises it too
      MPI_Query_thread(&level);
      return level;
    }
    check_mpi(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &level), "make_communicator", "MPI_Init_thread");
    std::atexit(finalize_at_exit);
    LOOM_CHECK(level >= MPI_THREAD_FUNNELED, "make_communicator: this MPI does not support MPI_THREAD_FUNNELED");
    return level;
  }();
  return provided;
}

// The number of processes the launcher says it started, where it says so (0: unknown).
int launcher_world_size() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"})
    if (const char* value = std::getenv(name)) return std::atoi(value);
  return 0;
}

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator() : any_thread_(initialize_once() >= MPI_THREAD_SERIALIZED) {
    check_mpi(MPI_Comm_dup(MPI_COMM_WORLD, &comm_), "make_communicator", "MPI_Comm_dup");
    check_mpi(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN), "make_communicator", "MPI_Comm_set_errhandler");
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    // srun without --mpi=pmix starts processes that each see a world of one.
    const int expected = launcher_world_size();
    LOOM_CHECK(expected == 0 || expected == size_,
               "make_communicator: the launcher started {} processes but MPI sees {} (under srun, pass --mpi=pmix)",
               expected, size_);
  }
  ~MpiCommunicator() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Comm_free(&comm_);
  }

  int rank() const override { return rank_; }
  int world_size() const override { return size_; }
  std::string_view backend_name() const override { return "mpi"; }
  bool collectives_from_any_thread() const override { return any_thread_; }
  [[noreturn]] void abort(int code, std::string_view why) override {
    fmt::print(stderr, "loom: rank {} of {} aborting the job: {}\n", rank_, size_, why);
    std::fflush(nullptr);
    MPI_Abort(MPI_COMM_WORLD, code);
    std::_Exit(code);  // MPI_Abort should not return
  }
  void send_recv(int peer, const void* send, int64_t send_count, void* recv, int64_t recv_count, DType dtype) override {
    constexpr std::string_view op = "send_recv";
    MPI_Status status;
    check_mpi(MPI_Sendrecv(send, mpi_count(op, send_count), mpi_type(dtype), peer, kTag, recv,
                           mpi_count(op, recv_count), mpi_type(dtype), peer, kTag, comm_, &status),
              op, "MPI_Sendrecv");
    int received = 0;
    MPI_Get_count(&status, mpi_type(dtype), &received);
    LOOM_CHECK(received == recv_count, "{}: rank {} sent {} elements, rank {} expected {}", op, peer, received, rank_,
               recv_count);
  }

 private:
  static constexpr int kTag = 24;

  void all_reduce_max(std::span<int64_t> values) override {
    check_mpi(MPI_Allreduce(MPI_IN_PLACE, values.data(), mpi_count("agree", static_cast<int64_t>(values.size())),
                            MPI_INT64_T, MPI_MAX, comm_),
              "agree", "MPI_Allreduce");
  }
  void all_reduce_sum_fast(Tensor& t) override {
    check_mpi(MPI_Allreduce(MPI_IN_PLACE, t.raw_data(), mpi_count("all_reduce", t.numel()), mpi_type(t.dtype()),
                            MPI_SUM, comm_),
              "all_reduce", "MPI_Allreduce");
  }
  void reduce_scatter_sum_fast(const Tensor& input, Tensor& output) override {
    check_mpi(MPI_Reduce_scatter_block(input.raw_data(), output.raw_data(), mpi_count("reduce_scatter", output.numel()),
                                       mpi_type(output.dtype()), MPI_SUM, comm_),
              "reduce_scatter", "MPI_Reduce_scatter_block");
  }
  void all_gather_impl(const Tensor& input, Tensor& output) override {
    const int count = mpi_count("all_gather", input.numel());
    check_mpi(MPI_Allgather(input.raw_data(), count, mpi_type(input.dtype()), output.raw_data(), count,
                            mpi_type(output.dtype()), comm_),
              "all_gather", "MPI_Allgather");
  }
  void broadcast_impl(Tensor& t, int root) override {
    check_mpi(MPI_Bcast(t.raw_data(), mpi_count("broadcast", t.numel()), mpi_type(t.dtype()), root, comm_), "broadcast",
              "MPI_Bcast");
  }

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 1;
  bool any_thread_;  // MPI_THREAD_SERIALIZED provided
};

}  // namespace

std::unique_ptr<Communicator> make_mpi_communicator() { return std::make_unique<MpiCommunicator>(); }

}  // namespace loom::dist::detail
