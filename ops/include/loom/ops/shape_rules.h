#pragma once
// Shape rules shared by ops and their kernels (ops/src/loops.cpp).
#include <string_view>

#include "loom/tensor.h"

namespace loom::kernels {

// NumPy/PyTorch broadcasting; the error names the op and both shapes.
Shape broadcast_shapes(const Shape& a, const Shape& b, std::string_view op);
// Strides that read `t` as if it had `shape` (stride 0 along broadcast dims).
Shape broadcast_strides(const Tensor& t, const Shape& shape);
// Wraps, sorts and de-duplicates reduction dims; empty means all dims.
Shape normalize_dims(const Shape& dims, int64_t ndim, std::string_view op);
// The output shape of a reduction.
Shape reduced_shape(const Shape& shape, const Shape& dims, bool keepdim);

}  // namespace loom::kernels
