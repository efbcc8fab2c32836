// --precision float32|bf16|mixed for the commands that run a model: the matmul
// precision (loom/matmul_precision.h) or bf16 activations (Transformer::set_mixed_precision),
// and what happens on a CPU without bf16 products.
#include <fmt/core.h>

#include "commands.h"
#include "loom/matmul_precision.h"
#include "loom/ops.h"
#include "options.h"

namespace loom::tools {

const char* const kPrecisionHelp =
    "float32; bf16 (matmuls: bf16 products with float32 sums; activations, weights, optimizer state, softmax, layer "
    "norm and loss stay float32); or mixed (training stores activations in bf16 as well, every kernel computing in "
    "float32 inside; weights, gradients' sums, optimizer state and the loss stay float32). On the CPU bf16 and mixed "
    "need AVX512-BF16";

void add_precision_option(CLI::App& cmd, std::string& precision, bool training) {
  const std::vector<std::string> allowed =
      training ? std::vector<std::string>{"float32", "bf16", "mixed"} : std::vector<std::string>{"float32", "bf16"};
  cmd.add_option("--precision", precision,
                 training ? kPrecisionHelp
                          : "matmul precision: float32, or bf16 (bf16 "
                            "products with float32 sums; on the CPU it needs "
                            "AVX512-BF16)")
      ->capture_default_str()
      ->check(CLI::IsMember(allowed));
}

bool use_precision(const std::string& precision, const std::string& device) {
  // Mixed precision's products are bf16 by their operands' dtype: matmul precision stays float32.
  set_matmul_precision(MatmulPrecision::float32);
  if (precision == "float32") return false;
  // cuda: cuBLAS's bf16 tensor-core mode; cpu and standin run the CPU's kernels.
  if (!device.starts_with("cuda") && !cpu_bf16_matmul_available()) {
    fmt::print(stderr, "--precision {}: this CPU has no AVX512-BF16 (as oneDNN sees it): it runs in float32\n",
               precision);
    return false;
  }
  if (precision == "bf16") set_matmul_precision(MatmulPrecision::bf16);
  return true;
}

}  // namespace loom::tools
