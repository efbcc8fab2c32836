#pragma once
// The op side of the indexing ops (gather, scatter_add, index_select, index_add,
// embedding): index tensor checks and shapes. The kernels check the index values
// themselves (they alone may read them); their loops live in ops/cpu/index_loops.h.
#include "elementwise.h"

namespace loom::detail {

// Index tensors are int64 on the input's device; returns a contiguous copy (or
// index itself) for the kernel to read.
inline Tensor index_values(std::string_view op, const Tensor& index, const Tensor& input) {
  LOOM_CHECK(index.dtype() == DType::i64, "{}: index must be int64, got {}", op, dtype_name(index.dtype()));
  LOOM_CHECK(index.device() == input.device(), "{}: index is on {} and the input on {}", op, index.device(),
             input.device());
  NoGradGuard no_grad;
  return contiguous(index);
}

// Shape with dim replaced by `size`.
inline Shape with_dim(Shape shape, int64_t dim, int64_t size) {
  shape[dim] = size;
  return shape;
}

}  // namespace loom::detail
