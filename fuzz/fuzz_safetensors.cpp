// libFuzzer: any bytes as a checkpoint. A loom::Error is the only allowed
// failure; whatever loads must be readable to its last element.
#include "fuzz_input.h"
#include "loom/nn.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    loom::nn::TensorFile file = loom::nn::load_safetensors(loom::fuzz::input_file(data, size));
    for (const auto& [name, t] : file.tensors) (void)t.to(loom::DType::f64).to_vector<double>();
  } catch (const loom::Error&) {
  }
  return 0;
}
