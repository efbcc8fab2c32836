// dropout(x, p, train, gen): y_i = keep_i * x_i / (1 - p), keep_i = (u_i >= p)
//   dx = dropout_backward(g, mask, p) = keep * g / (1 - p)
// u_i is uniform in [0, 1), drawn from Philox(seed, offset) at the element's
// logical index i: word i % 4 of block i / 4 (one philox_block call per 4
// elements). The mask is a pure function of (seed, offset, i), so it is the same
// for any thread count.
// The forward also writes the keep decisions as a bitmask (bit i % 32 of word
// i / 32: an int32 tensor of ceil(n / 32) elements) that the backward reads
// instead of running Philox again. It costs N/8 bytes (384 KiB next to the
// 12 MiB of a [1536, 2048] float32 activation; B*H*T*T/8 for attention
// weights), and turns the backward into a memory-bound keep-and-scale pass
// (read g and the bits, write dx). Measured on [1536, 2048] float32, 1 thread
// (`loom bench ops`): regenerating the mask took 6.6 ms (10 Philox rounds per
// 4 elements are compute-bound), reading the bits 0.4 ms (PyTorch's saved-mask
// multiply: 0.8 ms).
// The map g -> keep * g / (1 - p) is linear and self-adjoint: dropout_backward's
// own backward is dropout_backward again, with the same mask. p == 0 or !train
// returns x itself.
#include <cmath>

#include "loom/philox.h"
#include "loom/philox_batch.h"
#include "rows.h"

namespace loom {

namespace {

// keep iff uniform_from_bits(bits) = (bits >> 8) / 2^24 >= p, as an integer compare.
uint32_t keep_threshold(double p) { return static_cast<uint32_t>(std::ceil(p * 16777216.0)); }

// One mask word per 32 elements; bits past the last element stay 0.
constexpr int64_t kMaskBits = 32;
int64_t mask_words(int64_t n) { return (n + kMaskBits - 1) / kMaskBits; }

// One batch of 16 Philox blocks (AVX-512 lanes, or two AVX2 batches) is 64
// elements: two mask words.
constexpr int64_t kChunk = 64;
static_assert(kChunk == 2 * kMaskBits);

// Fast: 64 elements at a time from one batch of Philox words, then a vector loop
// for keep-and-scale that also ORs the keep bits into the chunk's mask words;
// chunks split over threads.
template <typename T>
void dropout_fast(T* out, uint32_t* mask, const T* x, int64_t n, double p, uint64_t seed, uint64_t offset) {
  const T scale = p < 1.0 ? static_cast<T>(1.0 / (1.0 - p)) : T(0);
  const uint32_t threshold = keep_threshold(p);
  const int64_t chunks = (n + kChunk - 1) / kChunk, words_in_mask = mask_words(n);
  const bool parallel = n >= kernels::kParallelGrain && !omp_in_parallel();
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t c = 0; c < chunks; ++c) {
    alignas(64) uint32_t words[kChunk];
    philox_batch16(seed, offset, static_cast<uint64_t>(c) * (kChunk / 4), words);
    const int64_t base = c * kChunk, count = std::min(kChunk, n - base);
    uint64_t bits = 0;
#pragma omp simd reduction(| : bits)
    for (int64_t i = 0; i < count; ++i) {
      const bool keep = (words[i] >> 8) >= threshold;
      const T scaled = x[base + i] * scale;  // read unconditionally: no masked load
      out[base + i] = keep ? scaled : T(0);
      bits |= static_cast<uint64_t>(keep) << i;
    }
    mask[2 * c] = static_cast<uint32_t>(bits);
    if (2 * c + 1 < words_in_mask) mask[2 * c + 1] = static_cast<uint32_t>(bits >> 32);
  }
}

// Reference: each element draws its own uniform, compares it with p and sets its bit.
template <typename T>
void dropout_reference(T* out, uint32_t* mask, const T* x, int64_t n, double p, uint64_t seed, uint64_t offset) {
  for (int64_t w = 0; w < mask_words(n); ++w) mask[w] = 0;
  for (int64_t i = 0; i < n; ++i) {
    Philox4x32 bits = philox_block(seed, offset, static_cast<uint64_t>(i / 4));
    float u = uniform_from_bits(bits.v[i % 4]);
    bool keep = u >= p;
    out[i] = keep ? static_cast<T>(x[i] / (1.0 - p)) : T(0);
    if (keep) mask[i / kMaskBits] |= uint32_t(1) << (i % kMaskBits);
  }
}

// Fast backward: each mask word expanded lane by lane, (bits >> lane) & 1, in a
// vector loop (no Philox, no branches): reads g and N/8 mask bytes, writes out.
// Full words run a loop of constant length 32 with 32-bit lane shifts (a few
// vector instructions per 8 elements); only the last, partial word runs a
// loop of variable length.
template <typename T>
void expand_word(T* out, const T* g, uint32_t bits, T scale, int count) {
#pragma omp simd
  for (int lane = 0; lane < count; ++lane) {
    // g read unconditionally: in `keep ? g * scale : 0` the compiler may load g
    // only where kept, a masked load (vmaskmovps) that is slow on AMD.
    const T scaled = g[lane] * scale;
    out[lane] = (bits >> lane) & 1u ? scaled : T(0);
  }
}

template <typename T>
void masked_scale_fast(T* out, const uint32_t* mask, const T* g, int64_t n, double p) {
  const T scale = p < 1.0 ? static_cast<T>(1.0 / (1.0 - p)) : T(0);
  const int64_t full = n / kMaskBits;
  const bool parallel = n >= kernels::kParallelGrain && !omp_in_parallel();
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t c = 0; c < full; ++c) expand_word(out + c * kMaskBits, g + c * kMaskBits, mask[c], scale, kMaskBits);
  if (full * kMaskBits < n)
    expand_word(out + full * kMaskBits, g + full * kMaskBits, mask[full], scale, static_cast<int>(n - full * kMaskBits));
}

// Reference backward: one element at a time, its bit looked up by index.
template <typename T>
void masked_scale_reference(T* out, const uint32_t* mask, const T* g, int64_t n, double p) {
  for (int64_t i = 0; i < n; ++i) {
    bool keep = (mask[i / kMaskBits] >> (i % kMaskBits)) & 1u;
    out[i] = keep ? static_cast<T>(g[i] / (1.0 - p)) : T(0);
  }
}

void check_p(std::string_view op, const Tensor& x, double p) {
  detail::require_cpu(op, x);
  LOOM_CHECK(is_floating(x.dtype()), "{}: expected float32 or float64, got {}", op, dtype_name(x.dtype()));
  LOOM_CHECK(p >= 0.0 && p <= 1.0, "{}: p must be in [0, 1], got {}", op, p);
}

// The mask as uint32 words (stored as int32: loom has no unsigned dtype).
uint32_t* mask_data(const Tensor& mask) { return reinterpret_cast<uint32_t*>(mask.data<int32_t>()); }

}  // namespace

Tensor dropout(const Tensor& x, double p, bool train, Generator& gen, Where where) {
  CallSite site(where);
  LOOM_CHECK(p >= 0.0 && p <= 1.0, "dropout: p must be in [0, 1], got {}", p);
  if (!train || p == 0.0) return x;
  check_p("dropout", x, p);
  uint64_t seed = gen.seed(), offset = gen.next_offset();
  Tensor xd = detail::dense(x);
  Tensor out = Tensor::empty(x.shape(), {x.dtype(), x.device()});
  Tensor mask = Tensor::empty({mask_words(x.numel())}, {DType::i32, x.device()});
  dispatch_floating(x.dtype(), "dropout", [&](auto tag) {
    using T = typename decltype(tag)::type;
    auto run = kernel_mode() == KernelMode::reference ? dropout_reference<T> : dropout_fast<T>;
    run(out.data<T>(), mask_data(mask), xd.data<T>(), x.numel(), p, seed, offset);
  });
  return record("dropout", {x}, out, [mask, p](BackwardContext&, const Tensor& g) -> detail::Grads {
    return {dropout_backward(g, mask, p)};
  });
}

Tensor dropout_backward(const Tensor& grad, const Tensor& mask, double p, Where where) {
  CallSite site(where);
  check_p("dropout_backward", grad, p);
  LOOM_CHECK(mask.dtype() == DType::i32 && mask.device() == grad.device() && mask.numel() == mask_words(grad.numel()),
             "dropout_backward: mask must be the int32 bitmask of {} elements ({} words on {}), got {} {} on {}",
             grad.numel(), mask_words(grad.numel()), grad.device(), mask.numel(), dtype_name(mask.dtype()),
             mask.device());
  Tensor gd = detail::dense(grad), md = detail::dense(mask);
  Tensor out = Tensor::empty(grad.shape(), {grad.dtype(), grad.device()});
  dispatch_floating(grad.dtype(), "dropout_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    auto run = kernel_mode() == KernelMode::reference ? masked_scale_reference<T> : masked_scale_fast<T>;
    run(out.data<T>(), mask_data(md), gd.data<T>(), grad.numel(), p);
  });
  return record("dropout_backward", {grad}, out, [md, p](BackwardContext&, const Tensor& v) -> detail::Grads {
    return {dropout_backward(v, md, p)};
  });
}

namespace {
// A fresh generator per call: the same mask on every evaluation (finite differences).
Tensor dropout_fixed(const Tensor& x, double p) {
  Generator gen(1234);
  return dropout(x, p, true, gen);
}

// A bitmask input: any 32-bit pattern per word ([0, 2^32) wraps into int32).
InputSpec mask_input(int64_t elements) { return {{mask_words(elements)}, Domain::any, DType::i32, int64_t(1) << 32, false}; }
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

// Samples: a random bitmask over a partial last word (28 elements) and over two
// full words and a partial one (65 elements).
LOOM_OP(dropout_backward){
    .name = "dropout_backward",
    .call = [](const OpArgs& x) { return dropout_backward(x[0], x[1], 0.3); },
    .samples = {{{{{4, 7}}, mask_input(28)}, {}, "[4,7] p=0.3"},
                {{{{5, 13}}, mask_input(65)}, {}, "[5,13] p=0.3"}},
    .composed = [](const OpArgs& x) { return mul(x[0], dropout_backward(ones_like(x[0]), x[1], 0.3)); },
};

}  // namespace loom
