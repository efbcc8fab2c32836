#!/usr/bin/env bash
# Data-parallel training costs (issue 24), one thread per rank:
#   bench/dp.sh               loom's all-reduce (Reduce::exact, Reduce::fast) against Open MPI's own
#                             MPI_Allreduce on the same float32 buffers, 4 KiB to 100 MiB, 2 ranks
#   bench/dp.sh --ranks 4     at 4 ranks (a power of two: the exact tree needs one)
#   bench/dp.sh --rounds 90   more alternated rounds (default 30; sizes over 4 MiB take a third)
# Environment: ALLREDUCE (default build/bench/loom_bench_allreduce, built where CMake finds
# Open MPI), MPIEXEC (default mpiexec). Root needs --allow-run-as-root, and more ranks than
# cores --oversubscribe: both are passed (with more ranks than cores, the small sizes time
# the scheduler as much as the library).
set -euo pipefail
cd "$(dirname "$0")/.."
bench="${ALLREDUCE:-build/bench/loom_bench_allreduce}"
mpiexec="${MPIEXEC:-mpiexec}"
[[ -x "$bench" ]] || {
  echo "bench/dp.sh: no all-reduce benchmark at $bench: build it first (cmake --build build --target" \
       "loom_bench_allreduce; configured only where CMake finds Open MPI: scripts/setup installs it)" >&2
  exit 2
}
command -v "$mpiexec" >/dev/null || { echo "bench/dp.sh: no $mpiexec on PATH (scripts/setup installs Open MPI)" >&2; exit 2; }
ranks=2
args=()
while (($#)); do
  case "$1" in
    --ranks) ranks="$2"; shift 2 ;;
    *) args+=("$1"); shift ;;
  esac
done
export OMP_NUM_THREADS=1
"$mpiexec" --allow-run-as-root --oversubscribe -n "$ranks" "$bench" "${args[@]}"
echo "bench/dp.sh: the training part (small preset tokens/s, 1 rank x 2 threads against 2 ranks x 1 thread," \
     "and the exposed communication per step) waits for the trainer's data-parallel integration"
