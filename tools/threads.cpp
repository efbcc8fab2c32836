// The thread count every command takes: OpenMP's and OpenBLAS's, set together.
#include <cblas.h>
#include <omp.h>

#include "commands.h"

namespace loom::tools {

void use_threads(int threads) {
  omp_set_num_threads(threads);
  openblas_set_num_threads(threads);
}

}  // namespace loom::tools
