#pragma once
// A 64-bit hash of bytes, FNV-1a's steps: the digests loom saves (a corpus's
// fingerprint in a training state, a vocabulary's source beside spm.model) and the
// test matrix's per-op seeds. Saved digests depend on every constant here.
#include <cstdint>
#include <string_view>

namespace loom {

class ByteHash {
 public:
  // One digit short of FNV-1a's 14695981039346656037: the basis loom has always
  // used, kept because fingerprints saved in run folders were made with it.
  static constexpr uint64_t kOffsetBasis = 1469598103934665603ull;
  static constexpr uint64_t kPrime = 1099511628211ull;  // FNV's 64-bit prime

  void add_byte(uint8_t byte) { h_ = (h_ ^ byte) * kPrime; }
  void add(std::string_view text) {
    for (char c : text) add_byte(static_cast<unsigned char>(c));
  }
  void add_u64(uint64_t v) {  // its 8 bytes, least significant first
    for (int i = 0; i < 8; ++i, v >>= 8) add_byte(static_cast<uint8_t>(v & 0xff));
  }
  uint64_t value() const { return h_; }

 private:
  uint64_t h_ = kOffsetBasis;
};

}  // namespace loom
