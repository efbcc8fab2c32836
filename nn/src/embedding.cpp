#include <cmath>

#include "loom/nn/init.h"
#include "loom/nn/layers.h"
#include "loom/ops.h"

namespace loom::nn {

Embedding::Embedding(int64_t vocab_size, int64_t dim, int64_t padding_idx, Generator& gen, TensorOptions options)
    : padding_idx_(padding_idx) {
  LOOM_CHECK(vocab_size > 0 && dim > 0, "Embedding: sizes must be positive, got vocabulary {} and dim {}", vocab_size,
             dim);
  LOOM_CHECK(padding_idx >= -1 && padding_idx < vocab_size,
             "Embedding: padding_idx {} is out of range for a vocabulary of {}", padding_idx, vocab_size);
  Tensor table = normal({vocab_size, dim}, 1.0 / std::sqrt(static_cast<double>(dim)), options, gen);
  if (padding_idx >= 0) {
    NoGradGuard no_grad;
    fill_(table.select(0, padding_idx), 0.0);
  }
  register_parameter("weight", weight, table);
}

Tensor Embedding::forward(const Tensor& ids) const { return embedding(weight, ids, padding_idx_); }

}  // namespace loom::nn
