// --precision float32|bf16 for the commands that run a model: the matmul precision
// (loom/matmul_precision.h), and what happens on a CPU without bf16 products.
#include <fmt/core.h>

#include "commands.h"
#include "loom/matmul_precision.h"
#include "loom/ops.h"
#include "options.h"

namespace loom::tools {

const char* const kPrecisionHelp =
    "matmul precision: float32, or bf16 (bf16 products with float32 sums; weights, optimizer state, softmax, layer "
    "norm and loss stay float32; on the CPU it needs AVX512-BF16)";

void add_precision_option(CLI::App& cmd, std::string& precision) {
  cmd.add_option("--precision", precision, kPrecisionHelp)
      ->capture_default_str()
      ->check(CLI::IsMember({"float32", "bf16"}));
}

bool use_precision(const std::string& precision, const std::string& device) {
  if (precision != "bf16") {
    set_matmul_precision(MatmulPrecision::float32);
    return false;
  }
  // cuda: cuBLAS's bf16 tensor-core mode; cpu and standin run the CPU's kernels.
  if (!device.starts_with("cuda") && !cpu_bf16_matmul_available()) {
    fmt::print(stderr, "--precision bf16: this CPU has no AVX512-BF16 (as oneDNN sees it): matmuls stay float32\n");
    set_matmul_precision(MatmulPrecision::float32);
    return false;
  }
  set_matmul_precision(MatmulPrecision::bf16);
  return true;
}

}  // namespace loom::tools
