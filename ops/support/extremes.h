#pragma once
// What amax/amin and argmax/argmin share: each pair is one computation over the
// largest or the smallest value, told apart by the kernel's name.
#include "elementwise.h"

namespace loom::detail {

// The largest (amax) or smallest (amin) value over dims by `op`'s kernel, recorded with
// the gradient both have: g spread evenly over the tied extremes, as torch's.
Tensor extreme_over(std::string_view op, const Tensor& x, const Shape& dims, bool keepdim);
// The index (int64) of the first largest (argmax) or smallest (argmin) value along
// dim by `op`'s kernel; a 0-d tensor's is 0. Piecewise constant: not recorded.
Tensor extreme_index(std::string_view op, const Tensor& x, int64_t dim, bool keepdim);
// argmax or argmin as torch's: along dim, or without one the index into the flattened tensor.
Tensor flat_or_along(std::string_view op, const Tensor& x, std::optional<int64_t> dim, bool keepdim);
// max or min along dim: the values where index_op's extreme_index points (gather, so
// the values' gradient goes to those positions only) and the indices.
ValuesAndIndices extreme_along(std::string_view op, std::string_view index_op, const Tensor& x, int64_t dim,
                               bool keepdim);
// The samples argmax and argmin share (attributes by their schemas' names).
std::vector<Sample> extreme_index_samples();

}  // namespace loom::detail
