#pragma once
// Where linear's backward takes its weight and bias gradients from one product.
#include "loom/tensor.h"

namespace loom::detail {

// Whether linear's backward takes dW and db from linear_param_grads for a gradient
// like g: where a device has a kernel for it (one product computing both). Not on the
// CPU, whose kernel is the reference (matmul's and a sum's work, no faster: linear keeps
// matmul's and sum_to's bits there), nor for float32 in bf16 matmul precision, whose
// products round their operands while the bias gradient sums g itself.
bool fused_linear_param_grads(const Tensor& g);

}  // namespace loom::detail
