#pragma once
// Small helpers shared by the test suites.
#include <functional>
#include <string>
#include <vector>

#include "loom/error.h"
#include "loom/kernel_table.h"
#include "loom/models/transformer.h"
#include "loom/ops.h"

namespace loom::testing {

// Built with AddressSanitizer (gcc says __SANITIZE_ADDRESS__, clang __has_feature):
// a few suites then run the same code on less work (the release run proves the results).
#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kSanitized = true;
#elif defined(__has_feature)
inline constexpr bool kSanitized = __has_feature(address_sanitizer);
#else
inline constexpr bool kSanitized = false;
#endif

// The message of the loom::Error that fn throws, or "(no error)".
inline std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// Token ids as an int64 [batch, n / batch] tensor, row by row.
inline Tensor ids(const std::vector<int64_t>& values, int64_t batch) {
  return from_vector(values, {batch, static_cast<int64_t>(values.size()) / batch}, {DType::i64});
}

// f() with every op on its reference kernel.
template <typename F>
auto on_reference_kernels(F f) {
  KernelModeGuard guard(KernelMode::reference);
  return f();
}

// Parameters of a post-norm Transformer with shared, tied embeddings, counted by hand.
inline int64_t expected_parameters(const models::TransformerConfig& c) {
  const int64_t d = c.d_model, attention = 4 * (d * d + d), ff = 2 * d * c.d_ff + c.d_ff + d, norm = 2 * d;
  return c.src_vocab * d + c.encoder_layers * (attention + ff + 2 * norm) +
         c.decoder_layers * (2 * attention + ff + 3 * norm);
}

}  // namespace loom::testing
