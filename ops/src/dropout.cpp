// dropout(x, p, train, gen): y_i = keep_i * x_i / (1 - p), keep_i = (u_i >= p)
//   dx = dropout_backward(g, p, seed, offset) = keep * g / (1 - p)
// u_i is uniform in [0, 1), drawn from Philox(seed, offset) at the element's
// logical index i: word i % 4 of block i / 4 (one philox_block call per 4
// elements). The mask is a pure function of (seed, offset, i), so it is the same
// for any thread count, and the backward regenerates it instead of saving it:
// no N-byte mask lives from forward to backward (attention weights' dropout
// would hold B*H*T*T bytes), and 10 Philox rounds per 4 elements cost less
// than the memory traffic of reading a saved mask back on large tensors.
// The map g -> keep * g / (1 - p) is linear and self-adjoint: dropout_backward's
// own backward is dropout_backward again. p == 0 or !train returns x itself.
#include <cmath>

#include "loom/philox.h"
#include "loom/philox_batch.h"
#include "rows.h"

namespace loom {

namespace {

// keep iff uniform_from_bits(bits) = (bits >> 8) / 2^24 >= p, as an integer compare.
uint32_t keep_threshold(double p) { return static_cast<uint32_t>(std::ceil(p * 16777216.0)); }

// Fast: 32 elements at a time from one batch of 8 Philox blocks (AVX2 lanes),
// then a vector loop for keep-and-scale; chunks split over threads.
template <typename T>
void dropout_fast(T* out, const T* x, int64_t n, double p, uint64_t seed, uint64_t offset) {
  const T scale = p < 1.0 ? static_cast<T>(1.0 / (1.0 - p)) : T(0);
  const uint32_t threshold = keep_threshold(p);
  constexpr int64_t kChunk = 4 * kPhiloxBatchBlocks;
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  const bool parallel = n >= kernels::kParallelGrain && !omp_in_parallel();
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t c = 0; c < chunks; ++c) {
    alignas(32) uint32_t words[kChunk];
    philox_batch(seed, offset, static_cast<uint64_t>(c) * kPhiloxBatchBlocks, words);
    const int64_t base = c * kChunk, count = std::min(kChunk, n - base);
#pragma omp simd
    for (int64_t i = 0; i < count; ++i) out[base + i] = (words[i] >> 8) >= threshold ? x[base + i] * scale : T(0);
  }
}

// Reference: each element draws its own uniform and compares it with p.
template <typename T>
void dropout_reference(T* out, const T* x, int64_t n, double p, uint64_t seed, uint64_t offset) {
  for (int64_t i = 0; i < n; ++i) {
    Philox4x32 bits = philox_block(seed, offset, static_cast<uint64_t>(i / 4));
    float u = uniform_from_bits(bits.v[i % 4]);
    bool keep = u >= p;
    out[i] = keep ? static_cast<T>(x[i] / (1.0 - p)) : T(0);
  }
}

Tensor apply_mask(std::string_view op, const Tensor& x, double p, uint64_t seed, uint64_t offset) {
  detail::require_cpu(op, x);
  LOOM_CHECK(is_floating(x.dtype()), "{}: expected float32 or float64, got {}", op, dtype_name(x.dtype()));
  LOOM_CHECK(p >= 0.0 && p <= 1.0, "{}: p must be in [0, 1], got {}", op, p);
  Tensor xd = detail::dense(x);
  Tensor out = Tensor::empty(x.shape(), {x.dtype(), x.device()});
  dispatch_floating(x.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    auto run = kernel_mode() == KernelMode::reference ? dropout_reference<T> : dropout_fast<T>;
    run(out.data<T>(), xd.data<T>(), x.numel(), p, seed, offset);
  });
  return out;
}

}  // namespace

Tensor dropout(const Tensor& x, double p, bool train, Generator& gen, Where where) {
  CallSite site(where);
  LOOM_CHECK(p >= 0.0 && p <= 1.0, "dropout: p must be in [0, 1], got {}", p);
  if (!train || p == 0.0) return x;
  uint64_t seed = gen.seed(), offset = gen.next_offset();
  Tensor out = apply_mask("dropout", x, p, seed, offset);
  return record("dropout", {x}, out, [p, seed, offset](BackwardContext&, const Tensor& g) -> detail::Grads {
    return {dropout_backward(g, p, seed, offset)};
  });
}

Tensor dropout_backward(const Tensor& grad, double p, uint64_t seed, uint64_t offset, Where where) {
  CallSite site(where);
  Tensor out = apply_mask("dropout_backward", grad, p, seed, offset);
  return record("dropout_backward", {grad}, out, [p, seed, offset](BackwardContext&, const Tensor& v) -> detail::Grads {
    return {dropout_backward(v, p, seed, offset)};
  });
}

namespace {
// A fresh generator per call: the same mask on every evaluation (finite differences).
Tensor dropout_fixed(const Tensor& x, double p) {
  Generator gen(1234);
  return dropout(x, p, true, gen);
}
}  // namespace

// Composition: dropout is x times the dropped-and-scaled ones tensor (a constant).
LOOM_OP(dropout){
    .name = "dropout",
    .call = [](const OpArgs& x) { return dropout_fixed(x[0], 0.3); },
    .samples = {unary_sample({4, 7}, Domain::any, "[4,7] p=0.3"),
                unary_sample({2, 3, 5}, Domain::any, "[2,3,5] p=0.3"),
                {{{{3, 9}}}, [](const OpArgs& x) { return dropout_fixed(x[0], 0.7); }, "p=0.7",
                 [](const OpArgs& x) { return mul(x[0], dropout_fixed(ones_like(x[0]), 0.7)); }}},
    .composed = [](const OpArgs& x) { return mul(x[0], dropout_fixed(ones_like(x[0]), 0.3)); },
};

LOOM_OP(dropout_backward){
    .name = "dropout_backward",
    .call = [](const OpArgs& x) { return dropout_backward(x[0], 0.3, 1234, 5); },
    .samples = {unary_sample({4, 7}, Domain::any, "p=0.3")},
    .composed = [](const OpArgs& x) { return mul(x[0], dropout_backward(ones_like(x[0]), 0.3, 1234, 5)); },
};

}  // namespace loom
