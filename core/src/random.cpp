#include "loom/random.h"

#include <cmath>

#include "loom/philox.h"

namespace loom {

Generator& default_generator() {
  static Generator gen(0);
  return gen;
}

void manual_seed(uint64_t seed) { default_generator() = Generator(seed); }

namespace {
// Fills a host tensor: element i is value(i) for a pure function of i.
template <typename T, typename Fn>
void fill_parallel(Tensor& out, Fn value) {
  T* p = out.data<T>();
  int64_t n = out.numel();
#pragma omp parallel for schedule(static) if (n > 32768)
  for (int64_t i = 0; i < n; ++i) p[i] = value(i);
}
}  // namespace

Tensor rand(const Shape& shape, TensorOptions options, Generator& gen, double low, double high) {
  uint64_t seed = gen.seed(), offset = gen.next_offset();
  Tensor out = Tensor::empty(shape, {options.dtype, kCPU});
  dispatch_floating(options.dtype, "rand", [&](auto tag) {
    using T = typename decltype(tag)::type;
    fill_parallel<T>(out, [&](int64_t i) {
      Philox4x32 r = philox_block(seed, offset, static_cast<uint64_t>(i) / 2);
      int lane = static_cast<int>(i % 2) * 2;
      double u = uniform_double_from_bits(r.v[lane], r.v[lane + 1]);
      return static_cast<T>(low + (high - low) * u);
    });
  });
  return transfer(out, options.device);
}

Tensor randn(const Shape& shape, TensorOptions options, Generator& gen, double mean, double std) {
  uint64_t seed = gen.seed(), offset = gen.next_offset();
  Tensor out = Tensor::empty(shape, {options.dtype, kCPU});
  dispatch_floating(options.dtype, "randn", [&](auto tag) {
    using T = typename decltype(tag)::type;
    fill_parallel<T>(out, [&](int64_t i) {
      // One Philox block gives the two uniforms of a Box-Muller pair: elements
      // 2k and 2k+1 are its cosine and sine halves.
      Philox4x32 r = philox_block(seed, offset, static_cast<uint64_t>(i) / 2);
      double u1 = 1.0 - uniform_double_from_bits(r.v[0], r.v[1]);  // (0, 1]: log is finite
      double u2 = uniform_double_from_bits(r.v[2], r.v[3]);
      double radius = std::sqrt(-2.0 * std::log(u1));
      double angle = 2.0 * M_PI * u2;
      double z = (i % 2 == 0) ? radius * std::cos(angle) : radius * std::sin(angle);
      return static_cast<T>(mean + std * z);
    });
  });
  return transfer(out, options.device);
}

}  // namespace loom
