#pragma once
// The loop every update runs: body(i) for each element of a parameter, over
// OpenMP threads when large. Elementwise, so the bits never depend on the
// thread count.
#include <omp.h>

#include <cstdint>
#include <cstring>

#include "loom/tensor.h"

namespace loom::optim::detail {

inline constexpr int64_t kParallelGrain = 32768;

template <typename Body>
void for_each_element(int64_t n, Body body) {
#pragma omp parallel for simd schedule(static) if (n >= kParallelGrain && !omp_in_parallel())
  for (int64_t i = 0; i < n; ++i) body(i);
}

// Optimizer state (moments, momentum buffers): zeros shaped like p, on its device.
inline Tensor zeros_like_param(const Tensor& p) {
  Tensor t = Tensor::empty(p.shape(), {p.dtype(), p.device()});
  std::memset(t.raw_data(), 0, static_cast<size_t>(t.numel()) * dtype_size(t.dtype()));
  return t;
}

}  // namespace loom::optim::detail
