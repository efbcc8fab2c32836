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

void add_progress_option(CLI::App& cmd, std::string& progress) {
  cmd.add_option("--progress", progress,
                 "auto (a bar on a terminal; plain lines in a file, a pipe or under mpirun/Slurm), bar, lines, or "
                 "off (no bar and no step lines)")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "bar", "lines", "off"}));
}

}  // namespace loom::tools
