// libFuzzer: any text as a model configuration (a checkpoint's metadata is user
// input). A loom::Error is the only allowed failure; a small accepted model is built.
#include <string>

#include "loom/models.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    auto config = loom::models::TransformerConfig::from_json(std::string(reinterpret_cast<const char*>(data), size));
    if (config.approximate_elements() < 2e5) loom::models::Transformer model(config);
  } catch (const loom::Error&) {
  }
  return 0;
}
