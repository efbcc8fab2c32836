// The thread count every command takes: OpenMP's and OpenBLAS's, set together,
// and the one --threads flag that sets it.
#include <cblas.h>
#include <omp.h>

#include "commands.h"
#include "options.h"
#include "loom/matmul_precision.h"
#include "loom/ops.h"

namespace loom::tools {

void use_threads(int threads) {
  omp_set_num_threads(threads);
  openblas_set_num_threads(threads);
}

void add_threads_option(CLI::App& cmd, int& threads) {
  cmd.add_option("--threads", threads, "OpenMP / OpenBLAS threads")->capture_default_str()->check(in_range(1, 1024));
}

}  // namespace loom::tools

namespace loom::tools {

void add_precision_option(CLI::App& cmd, std::string& precision) {
  cmd.add_option("--precision", precision,
                 "matmul precision: float32, or bf16 (bf16 products with float32 sums; weights, optimizer "
                 "state, softmax, layer norm and loss stay float32; on the CPU it needs AVX512-BF16)")
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
