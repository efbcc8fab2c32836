// CPU kernels of dropout and dropout_backward (ops/src/dropout.cpp), and of
// relu_dropout and its backward (ops/src/relu_dropout.cpp: the same with max(x, 0)
// in place of x): the fast kernel and the plain reference kernel beside it. Element
// i draws word i % 4 of Philox block i / 4 at (seed, offset); its keep bit is bit
// i % 32 of mask word i / 32.
#include <omp.h>

#include <algorithm>
#include <cmath>

#include "loom/kernel_table.h"
#include "loom/kernels/functors.h"
#include "loom/kernels/loops.h"
#include "loom/ops/kernel_signatures.h"
#include "type_lists.h"
#include "loom/philox.h"
#include "loom/philox_batch.h"
#include "dropout_add_layer_norm.h"

namespace loom {

namespace {

using kernels::dropout_mask_words;
using kernels::kDropoutMaskBits;

// keep iff uniform_from_bits(bits) = (bits >> 8) / 2^24 >= p, as an integer compare.
uint32_t keep_threshold(double p) { return static_cast<uint32_t>(std::ceil(p * 16777216.0)); }

// One chunk of 32 Philox blocks (philox_batch32) is 128 elements: four mask words.
constexpr int64_t kChunk = 4 * kPhiloxChunkBlocks;
static_assert(kChunk == 4 * kDropoutMaskBits);

// What dropout keeps and scales: x itself, or relu(x) (relu_dropout).
struct Identity {
  template <typename T>
  T operator()(T x) const {
    return x;
  }
};

// Keep-and-scale for up to one mask word's elements, a vector loop that also
// gathers their keep bits; returns the word. kAdd: out = residual + the kept value
// (dropout_add_layer_norm's residual sum), the same bits as add after dropout.
// bfloat16 computes in float32 (C) and rounds once.
template <typename T, typename Input, bool kAdd, typename C = compute_type<T>>
uint32_t keep_and_scale(T* out, const T* x, const T* residual, const uint32_t* words, uint32_t threshold, C scale,
                        int64_t count) {
  uint32_t bits = 0;
#pragma omp simd reduction(| : bits)
  for (int64_t i = 0; i < count; ++i) {
    const bool keep = (words[i] >> 8) >= threshold;
    const C scaled = Input{}(C(x[i])) * scale;  // read unconditionally: no masked load
    const C kept = keep ? scaled : C(0);
    if constexpr (kAdd)
      out[i] = C(residual[i]) + kept;  // stored into bfloat16: rounded once
    else
      out[i] = kept;
    bits |= static_cast<uint32_t>(keep) << i;
  }
  return bits;
}

// Fast: 128 elements at a time from one chunk of Philox words, kept and scaled a
// mask word at a time; chunks split over threads.
template <typename T, typename Input, bool kAdd = false>
void dropout_fast(T* out, uint32_t* mask, const T* x, int64_t n, double p, uint64_t seed, uint64_t offset,
                  const T* residual = nullptr) {
  using C = compute_type<T>;
  const C scale = p < 1.0 ? static_cast<C>(1.0 / (1.0 - p)) : C(0);
  const uint32_t threshold = keep_threshold(p);
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  const bool parallel = n >= kernels::kParallelGrain && !omp_in_parallel();
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t c = 0; c < chunks; ++c) {
    alignas(64) uint32_t words[kChunk];
    philox_batch32(seed, offset, static_cast<uint64_t>(c) * kPhiloxChunkBlocks, words);
    for (int64_t first = c * kChunk; first < std::min(n, (c + 1) * kChunk); first += kDropoutMaskBits)
      mask[first / kDropoutMaskBits] = keep_and_scale<T, Input, kAdd>(
          out + first, x + first, kAdd ? residual + first : nullptr, words + (first - c * kChunk), threshold, scale,
          std::min(kDropoutMaskBits, n - first));
  }
}

// Reference: each element draws its own uniform, compares it with p and sets its bit.
template <typename T, typename Input>
void dropout_reference(T* out, uint32_t* mask, const T* x, int64_t n, double p, uint64_t seed, uint64_t offset,
                       const T* residual = nullptr) {
  for (int64_t w = 0; w < dropout_mask_words(n); ++w) mask[w] = 0;
  for (int64_t i = 0; i < n; ++i) {
    Philox4x32 bits = philox_block(seed, offset, static_cast<uint64_t>(i / 4));
    float u = uniform_from_bits(bits.v[i % 4]);
    bool keep = u >= p;
    using C = compute_type<T>;
    const C kept = keep ? static_cast<C>(Input{}(C(x[i])) / (1.0 - p)) : C(0);
    out[i] = T(residual ? C(residual[i]) + kept : kept);
    if (keep) mask[i / kDropoutMaskBits] |= uint32_t(1) << (i % kDropoutMaskBits);
  }
}

// Fast backward: each mask word expanded lane by lane, (bits >> lane) & 1, in a
// vector loop (no Philox, no branches): reads g and N/8 mask bytes, writes out.
// Full words run a loop of constant length 32 with 32-bit lane shifts (a few
// vector instructions per 8 elements); only the last, partial word runs a
// loop of variable length. relu_dropout's backward (Relu) also zeroes where
// x <= 0: relu_backward after dropout_backward, in one select.
template <typename T, bool Relu, typename C = compute_type<T>>
void expand_word(T* out, const T* g, const T* x, uint32_t bits, C scale, int count) {
#pragma omp simd
  for (int lane = 0; lane < count; ++lane) {
    // g read unconditionally: in `keep ? g * scale : 0` the compiler may load g
    // only where kept, a masked load (vmaskmovps) that is slow on AMD.
    const C scaled = C(g[lane]) * scale;
    const C kept = (bits >> lane) & 1u ? scaled : C(0);
    if constexpr (Relu)
      out[lane] = fn::ReluBackward{}(C(x[lane]), kept);
    else
      out[lane] = kept;
  }
}

// x: relu_dropout's input (Relu), else unused (null).
template <typename T, bool Relu>
void masked_scale_fast(T* out, const uint32_t* mask, const T* g, const T* x, int64_t n, double p) {
  using C = compute_type<T>;
  const C scale = p < 1.0 ? static_cast<C>(1.0 / (1.0 - p)) : C(0);
  const int64_t full = n / kDropoutMaskBits;
  const bool parallel = n >= kernels::kParallelGrain && !omp_in_parallel();
  auto at = [x](int64_t first) { return Relu ? x + first : nullptr; };
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t c = 0; c < full; ++c)
    expand_word<T, Relu>(out + c * kDropoutMaskBits, g + c * kDropoutMaskBits, at(c * kDropoutMaskBits), mask[c], scale,
                         kDropoutMaskBits);
  if (full * kDropoutMaskBits < n)
    expand_word<T, Relu>(out + full * kDropoutMaskBits, g + full * kDropoutMaskBits, at(full * kDropoutMaskBits),
                         mask[full], scale, static_cast<int>(n - full * kDropoutMaskBits));
}

// Reference backward: one element at a time, its bit looked up by index.
template <typename T, bool Relu>
void masked_scale_reference(T* out, const uint32_t* mask, const T* g, const T* x, int64_t n, double p) {
  for (int64_t i = 0; i < n; ++i) {
    bool keep = (mask[i / kDropoutMaskBits] >> (i % kDropoutMaskBits)) & 1u;
    if (Relu && !(compute_type<T>(x[i]) > 0)) keep = false;
    out[i] = keep ? T(static_cast<compute_type<T>>(g[i] / (1.0 - p))) : T(0);
  }
}

// ---- the kernels in the table ----

// The mask as uint32 words (stored as int32: loom has no unsigned dtype).
uint32_t* mask_words(const Tensor& mask) { return reinterpret_cast<uint32_t*>(mask.data<int32_t>()); }

template <typename T, void (*Run)(T*, uint32_t*, const T*, int64_t, double, uint64_t, uint64_t, const T*)>
void dropout_kernel(const Tensor& out, const Tensor& mask, const Tensor& x, kernels::DropoutDraw draw) {
  Run(out.data<T>(), mask_words(mask), x.data<T>(), x.numel(), draw.p, draw.seed, draw.offset, nullptr);
}

template <typename T, void (*Run)(T*, const uint32_t*, const T*, const T*, int64_t, double)>
void dropout_backward_kernel(const Tensor& out, const Tensor& grad, const Tensor& mask, double p) {
  Run(out.data<T>(), mask_words(mask), grad.data<T>(), nullptr, grad.numel(), p);
}

template <typename T, void (*Run)(T*, const uint32_t*, const T*, const T*, int64_t, double)>
void relu_dropout_backward_kernel(const Tensor& out, const Tensor& x, const Tensor& grad, const Tensor& mask,
                                  double p) {
  Run(out.data<T>(), mask_words(mask), grad.data<T>(), x.data<T>(), grad.numel(), p);
}

template <typename T>
void register_for() {
  register_kernel<kernels::DropoutKernel>("dropout", DeviceType::cpu, dtype_of<T>(),
                                          dropout_kernel<T, dropout_fast<T, Identity>>,
                                          dropout_kernel<T, dropout_reference<T, Identity>>);
  register_kernel<kernels::DropoutBackwardKernel>("dropout_backward", DeviceType::cpu, dtype_of<T>(),
                                                  dropout_backward_kernel<T, masked_scale_fast<T, false>>,
                                                  dropout_backward_kernel<T, masked_scale_reference<T, false>>);
  register_kernel<kernels::DropoutKernel>("relu_dropout", DeviceType::cpu, dtype_of<T>(),
                                          dropout_kernel<T, dropout_fast<T, fn::Relu>>,
                                          dropout_kernel<T, dropout_reference<T, fn::Relu>>);
  register_kernel<kernels::ReluDropoutBackwardKernel>("relu_dropout_backward", DeviceType::cpu, dtype_of<T>(),
                                                      relu_dropout_backward_kernel<T, masked_scale_fast<T, true>>,
                                                      relu_dropout_backward_kernel<T, masked_scale_reference<T, true>>);
}

}  // namespace

namespace detail {
template <typename T>
void dropout_add_fast(T* h, uint32_t* mask, const T* x, const T* s, int64_t n, kernels::DropoutDraw d) {
  dropout_fast<T, Identity, true>(h, mask, s, n, d.p, d.seed, d.offset, x);
}
template <typename T>
void dropout_add_reference(T* h, uint32_t* mask, const T* x, const T* s, int64_t n, kernels::DropoutDraw d) {
  dropout_reference<T, Identity>(h, mask, s, n, d.p, d.seed, d.offset, x);
}
#define LOOM_DROPOUT_ADD(T)                                                                            \
  template void dropout_add_fast<T>(T*, uint32_t*, const T*, const T*, int64_t, kernels::DropoutDraw); \
  template void dropout_add_reference<T>(T*, uint32_t*, const T*, const T*, int64_t, kernels::DropoutDraw);
LOOM_DROPOUT_ADD(float)
LOOM_DROPOUT_ADD(double)
LOOM_DROPOUT_ADD(bfloat16)
#undef LOOM_DROPOUT_ADD
}  // namespace detail

LOOM_KERNELS(cpu_dropout) {
  kernels::for_each_type(FloatingTypesBf16{}, [](auto tag) { register_for<typename decltype(tag)::type>(); });
}

}  // namespace loom
