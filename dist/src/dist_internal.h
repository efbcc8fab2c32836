#pragma once
// What dist's sources share: argument checks, the elementwise add of the exact
// sums, the exact algorithms and the backends' factories.
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "loom/dist/communicator.h"
#include "loom/dist/tree_sum.h"

namespace loom::dist::detail {

// Why `t` cannot take part in a collective ("" when it can): on `where` and
// contiguous, and float32/float64 when `reduced` (a sum needs arithmetic).
std::string tensor_problem(std::string_view op, std::string_view name, const Tensor& t, bool reduced, Device where);

// f(T{}) with T the C++ type of a float32/float64 dtype.
template <typename F>
void with_float_type(DType dtype, F&& f) {
  if (dtype == DType::f32) {
    f(float{});
  } else {
    LOOM_CHECK(dtype == DType::f64, "dist: no sum for dtype {}", dtype_name(dtype));
    f(double{});
  }
}

// out[i] = a[i] + b[i]; out may be a or b. Elementwise, so threads do not change bits.
template <typename T>
void add_elements(T* out, const T* a, const T* b, int64_t n) {
#pragma omp parallel for schedule(static) if (n >= (int64_t{1} << 16))
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

// Which largest subtrees (tree_sum.h) each rank holds when each holds
// `leaves_per_rank` consecutive micro-batches of the tree over all of them.
struct SubtreeLayout {
  SubtreeLayout(int world, int64_t leaves_per_rank);
  int64_t leaves_per_rank;
  std::vector<std::vector<LeafRange>> subtrees;  // per rank, left to right
};

// The exact (fixed-tree) collectives over Communicator::send_recv, on host memory;
// arguments checked. `out` gets the sum of the tree whose largest subtrees' sums the
// ranks hold (may be one of them); reduce_scatter's input is one leaf per rank.
void exact_all_reduce(Communicator& comm, std::span<const Tensor> subtree_sums, int64_t leaves_per_rank, Tensor& out);
void exact_reduce_scatter(Communicator& comm, const Tensor& input, Tensor& output);

std::unique_ptr<Communicator> make_self_communicator();
std::unique_ptr<Communicator> make_mpi_communicator();  // fails where loom has no MPI

}  // namespace loom::dist::detail
