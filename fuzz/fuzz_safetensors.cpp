// libFuzzer: any bytes as a checkpoint. A loom::Error is the only allowed
// failure; whatever loads must be readable to its last element, and the
// header-only reader must give the same metadata, or fail with the same error.
#include "fuzz_input.h"
#include "loom/nn.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = loom::fuzz::input_file(data, size);
  loom::nn::TensorFile file;
  std::string error, metadata_error;
  try {
    file = loom::nn::load_safetensors(path);
  } catch (const loom::Error& e) {
    error = e.what();
  }
  try {
    if (loom::nn::load_safetensors_metadata(path) != file.metadata) __builtin_trap();
  } catch (const loom::Error& e) {
    metadata_error = e.what();
  }
  if (metadata_error != error) __builtin_trap();
  try {
    for (const auto& [name, t] : file.tensors) (void)t.to(loom::DType::f64).to_vector<double>();
  } catch (const loom::Error&) {
  }
  return 0;
}
