#!/usr/bin/env bash
# Data-parallel training costs, one thread per rank:
#   bench/dp.sh               loom's all-reduce (Reduce::exact, Reduce::fast) against Open MPI's own
#                             MPI_Allreduce on the same float32 buffers, 4 KiB to 100 MiB, 2 ranks
#   bench/dp.sh --ranks 4     at 4 ranks (any number: 3 has subtrees that straddle ranks)
#   bench/dp.sh --rounds 90   more alternated rounds (default 30; sizes over 4 MiB take a third)
#   bench/dp.sh --train       then training: the small preset on Multi30k, STEPS updates (default 40)
#                             of 2 micro-batches, 1 process x 2 threads against 2 ranks x 1 thread,
#                             with the reduction overlapping backward (--overlap on, the default) and
#                             after it (off), all three the same model bits: target tokens/s, the
#                             time per step in the cross-rank reduction (comm_ms) and the part of it
#                             the step waited for (exposed, reduce_ms), medians over the logged
#                             steps after the first 5
# Environment: ALLREDUCE (default build/bench/loom_bench_allreduce, built where CMake finds
# Open MPI), MPIEXEC (default mpiexec), LOOM (build/tools/loom), DATA (../shared/data/multi30k). Root needs --allow-run-as-root, and more ranks than
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
train=0
args=()
while (($#)); do
  case "$1" in
    --ranks) ranks="$2"; shift 2 ;;
    --train) train=1; shift ;;
    *) args+=("$1"); shift ;;
  esac
done
export OMP_NUM_THREADS=1
source bench/quiet.sh
quiet_start
"$mpiexec" --allow-run-as-root --oversubscribe -n "$ranks" "$bench" "${args[@]}"
((train)) || { quiet_end; exit; }

loom="${LOOM:-build/tools/loom}"
data="${DATA:-../shared/data/multi30k}"
steps="${STEPS:-40}"
[[ -d "$data" ]] || { echo "bench/dp.sh: no corpus at $data (set DATA)" >&2; exit 2; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
common=(train --data "$data" --preset small --max-steps "$steps" --log-every 1 --best-by loss --reduce exact)
echo "bench/dp.sh: training, small preset, $steps updates of 2 micro-batches; load average $(cut -d' ' -f1-3 /proc/loadavg)"
OMP_NUM_THREADS=2 "$loom" "${common[@]}" --threads 2 --accum 2 --out "$out/one" > "$out/one.log" 2>&1 ||
  { cat "$out/one.log"; exit 1; }
for overlap in on off; do
  mkdir "$out/two-$overlap"
  cp -r "$out"/one/corpus "$out/two-$overlap"/
  "$mpiexec" --allow-run-as-root --oversubscribe -n 2 "$loom" "${common[@]}" --threads 1 --accum 1 \
    --overlap "$overlap" --out "$out/two-$overlap" > "$out/two-$overlap.log" 2>&1 || { cat "$out/two-$overlap.log"; exit 1; }
done
python3 - "$out" <<'PY'
import json, statistics, sys
out = sys.argv[1]
def medians(run):
    rows = [json.loads(l) for l in open(f"{out}/{run}/metrics.jsonl")]
    train = [r for r in rows if r.get("type") == "train" and r["step"] > 5]
    return (statistics.median(r["tokens_per_s"] for r in train), statistics.median(r["comm_ms"] for r in train),
            statistics.median(r["reduce_ms"] for r in train), train[-1]["loss"])
one = medians("one")
print(f"1 process x 2 threads (--accum 2):  {one[0]:.0f} target tokens/s, the (one-rank) reduction {one[1]:.2f} ms/step, "
      f"{one[2]:.2f} exposed")
for overlap in ("on", "off"):
    two = medians(f"two-{overlap}")
    print(f"2 ranks x 1 thread, --overlap {overlap}: {two[0]:.0f} target tokens/s ({two[0] / one[0]:.2f}x), the cross-rank "
          f"reduction {two[1]:.2f} ms/step, {two[2]:.2f} exposed; last logged loss {two[3]:.4f} ({one[3]:.4f})")
PY
for overlap in on off; do
  cmp "$out/one/model.safetensors" "$out/two-$overlap/model.safetensors"
done && echo "model.safetensors: the same bits in all three runs (cmp)"
quiet_end  # bench/quiet.sh: exit code 3 when the machine was not quiet
