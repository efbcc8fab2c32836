// The PackedWeights guard (loom/ops/packed_weights.h) and the registry that the
// CPU matmul kernel asks for a weight's packed copy (packed_matmul.h). One
// registry for the process, under a mutex: a product in any thread sees the
// weights that a guard in another packed, so a sentence's bits never depend on
// which thread decodes it.
#include <atomic>
#include <map>
#include <memory>
#include <mutex>

#include "loom/matmul_precision.h"
#include "loom/ops/packed_weights.h"
#include "onednn_gemm.h"
#include "packed_matmul.h"

namespace loom {

namespace {

struct Registered {
  std::shared_ptr<const detail::PackedWeight> packed;  // shared with products running while the last guard ends
  int64_t ld = 0;
  int guards = 0;  // live guards that asked for it
};

std::mutex registry_mutex;
std::map<const float*, Registered> registry;  // by the weight's first element
std::atomic<size_t> registry_size{0};         // read without the lock: most products find nothing

// A float32 CPU matrix whose rows are contiguous: W^T then has strides (1, W's row
// stride), what blas_matmul looks for.
bool packable(const Tensor& w) {
  return w.defined() && w.device().type == DeviceType::cpu && w.dtype() == DType::f32 && w.dim() == 2 &&
         w.numel() > 0 && w.strides()[1] == 1 && w.strides()[0] >= w.shape()[1];
}

}  // namespace

bool packing_pays_on_many_rows() { return !onednn::f32_avx512_available(); }

PackedWeights::PackedWeights(const std::vector<Tensor>& weights) {
  // In bf16 precision, a bfloat16 copy instead (packed_matmul.h), for products then.
  const bool with_bf16 = matmul_precision() == MatmulPrecision::bf16;
  std::lock_guard lock(registry_mutex);
  for (const Tensor& w : weights) {
    if (!packable(w)) continue;
    const auto* data = static_cast<const float*>(w.raw_data());
    Registered& entry = registry[data];
    if (entry.guards == 0)
      entry = {.packed = std::make_shared<const detail::PackedWeight>(
                   detail::pack_weight(data, w.shape()[0], w.shape()[1], w.strides()[0], with_bf16)),
               .ld = w.strides()[0]};
    ++entry.guards;
    weights_.push_back(w);
  }
  registry_size = registry.size();
}

PackedWeights::~PackedWeights() {
  std::lock_guard lock(registry_mutex);
  for (const Tensor& w : weights_) {
    auto it = registry.find(static_cast<const float*>(w.raw_data()));
    if (it != registry.end() && --it->second.guards == 0) registry.erase(it);
  }
  registry_size = registry.size();
}

namespace detail {

std::shared_ptr<const PackedWeight> packed_weight_of(const float* w, int64_t n, int64_t k, int64_t ldw) {
  if (registry_size == 0) return nullptr;
  std::lock_guard lock(registry_mutex);
  auto it = registry.find(w);
  if (it == registry.end()) return nullptr;
  const Registered& entry = it->second;
  return entry.packed->n == n && entry.packed->k == k && entry.ld == ldw ? entry.packed : nullptr;
}

}  // namespace detail

}  // namespace loom
