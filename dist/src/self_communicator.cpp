// The "self" backend: one process, rank 0 of 1. Sums over one rank are the tensor
// itself; gathers and scatters are copies.
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "dist_internal.h"

namespace loom::dist::detail {

namespace {

void copy_elements(const Tensor& from, Tensor& to) {
  std::memcpy(to.raw_data(), from.raw_data(), static_cast<size_t>(from.numel()) * dtype_size(from.dtype()));
}

class SelfCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  std::string_view backend_name() const override { return "self"; }
  bool collectives_from_any_thread() const override { return true; }
  [[noreturn]] void abort(int code, std::string_view why) override {
    fmt::print(stderr, "loom: aborting: {}\n", why);
    std::fflush(nullptr);
    std::_Exit(code);
  }
  void send_recv(int peer, const void*, int64_t, void*, int64_t, DType) override {
    fail("send_recv: rank {} does not exist in a one-process run", peer);
  }

 private:
  void all_reduce_max(std::span<int64_t>) override {}
  void all_reduce_sum_fast(Tensor&) override {}
  void reduce_scatter_sum_fast(const Tensor& input, Tensor& output) override { copy_elements(input, output); }
  void all_gather_impl(const Tensor& input, Tensor& output) override { copy_elements(input, output); }
  void broadcast_impl(Tensor&, int) override {}
};

}  // namespace

std::unique_ptr<Communicator> make_self_communicator() { return std::make_unique<SelfCommunicator>(); }

}  // namespace loom::dist::detail
