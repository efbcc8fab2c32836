// The thread count every command takes: OpenMP's and OpenBLAS's, set together,
// and the one --threads flag that sets it.
#include <cblas.h>
#include <omp.h>

#include "commands.h"
#include "options.h"
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
