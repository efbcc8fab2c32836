#pragma once
// Random tensors from a counter-based stream. A Generator is just (seed, offset);
// each call takes a fresh range of the stream by advancing offset, so the result
// of a run depends on the seed and the sequence of calls, never on threads.
#include <cstdint>

#include "loom/tensor.h"

namespace loom {

class Generator {
 public:
  explicit Generator(uint64_t seed = 0) : seed_(seed) {}
  uint64_t seed() const { return seed_; }
  uint64_t offset() const { return offset_; }
  void set_offset(uint64_t offset) { offset_ = offset; }
  // Reserves one stream position (a Philox counter word) for the next call.
  uint64_t next_offset() { return offset_++; }

 private:
  uint64_t seed_;
  uint64_t offset_ = 0;
};

Generator& default_generator();
void manual_seed(uint64_t seed);

// Uniform in [low, high).
Tensor rand(const Shape& shape, TensorOptions options = {}, Generator& gen = default_generator(), double low = 0,
            double high = 1);
// Standard normal (Box-Muller on Philox pairs), scaled to mean + std * z.
Tensor randn(const Shape& shape, TensorOptions options = {}, Generator& gen = default_generator(), double mean = 0,
             double std = 1);

}  // namespace loom
