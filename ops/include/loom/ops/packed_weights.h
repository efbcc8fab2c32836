#pragma once
// A scope in which some weights are read from a copy packed for products with few
// rows (decoding's): while a PackedWeights lives, every float32 CPU product
// matmul(x, w.t()) with w one of its weights (a Linear's) multiplies by the
// packed copy (ops/cpu/packed_matmul.h) instead of calling sgemm, which packs the
// weight again on every call (and before the skinny kernel, where AVX-512 would
// run it: the packed copy is read faster).
//
// The weights must not change while the guard lives (decoding: eval mode, no
// graph); there is no version counter to notice if they do. Guards nest: a
// weight that an outer guard packed is not packed again, so a loop of decodings
// (`loom translate`, validation) wraps them in one guard and packs once, with the
// same results as each decoding packing for itself. Weights that are not float32
// CPU matrices stored row by row are left alone.
#include <vector>

#include "loom/tensor.h"

namespace loom {

// Whether a packed copy also beats the gemm on products of many rows (an encoder's:
// a batch's source tokens at once). On CPUs without AVX-512 the gemm is OpenBLAS's
// sgemm and the packed tiles are faster (one Zen 3 core: 80-90 against 50-57 GFLOP/s
// on the small model's shapes, in cache); elsewhere oneDNN's AVX-512 gemm is.
bool packing_pays_on_many_rows();

class PackedWeights {
 public:
  explicit PackedWeights(const std::vector<Tensor>& weights);
  ~PackedWeights();
  PackedWeights(const PackedWeights&) = delete;
  PackedWeights& operator=(const PackedWeights&) = delete;

  // How many of the weights this guard holds a packed copy of.
  size_t packed() const { return weights_.size(); }

 private:
  std::vector<Tensor> weights_;  // kept alive, so no other tensor can reuse their memory meanwhile
};

}  // namespace loom
