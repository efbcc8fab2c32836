#pragma once
// scaled_dot_product_attention's composite (ops/src/attention.cpp), which flash_attention
// is checked against and which gives the weights for study and a float mask's gradient.
#include "elementwise.h"

namespace loom::detail {

// dropout(softmax(q kᵀ / √d_k, mask), p, train, gen) @ v from matmul, softmax and dropout;
// `weights`, when given, receives the softmax's output.
Tensor attention_composite(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask, double dropout_p,
                           bool train, Generator& gen, Tensor* weights);

}  // namespace loom::detail
