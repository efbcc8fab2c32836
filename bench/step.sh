#!/usr/bin/env bash
# One Transformer training step, loom vs PyTorch, same model, batch and threads:
#   bench/step.sh                          'small' preset, batch 64 x 24, 2 threads
#   bench/step.sh --preset base --steps 5  (any option of `loom bench step`)
#   bench/step.sh --preset base --batch 32 --precision both   loom bf16 against loom float32, alternated
#   bench/step.sh --precision all          loom float32, bf16 and mixed alternated (mixed: bf16 activations)
#   bench/step.sh --device cuda --peak-tflops 67   on a GPU: both on it, with model FLOP utilization
# Ends with bench/quiet.sh's check: exit code 3 when other processes took more than
# QUIET_MAX percent (default 5) of the cores while it ran.
# Environment: LOOM (default build/tools/loom), TORCH_PYTHON (default /usr/bin/python3).
set -euo pipefail
cd "$(dirname "$0")/.."
loom="${LOOM:-build/tools/loom}"
torch_python="${TORCH_PYTHON:-/usr/bin/python3}"
[[ -x "$loom" ]] || { echo "bench/step.sh: no loom binary at $loom: build first" >&2; exit 2; }
threads=2
args=("$@")
peak=0
for ((i = 0; i < ${#args[@]}; i++)); do
  [[ "${args[$i]}" == --threads ]] && threads="${args[$((i + 1))]}"
  [[ "${args[$i]}" == --peak-tflops ]] && peak="${args[$((i + 1))]}"
done
export OMP_NUM_THREADS="$threads"
out=$(mktemp -d)
source bench/quiet.sh
quiet_start
echo "bench/step.sh: OMP_NUM_THREADS=$OMP_NUM_THREADS OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE-(unset)}" \
     "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
if [[ " ${args[*]} " == *" --precision both "* || " ${args[*]} " == *" --precision all "* ]]; then
  # loom's float32 and bf16 (all: and mixed) steps alternated ROUNDS times (default 3):
  # this machine's speed drifts within minutes, and alternating lets the precisions
  # share the drift. Each round's ratios to float32, their medians, then each precision
  # against torch as below.
  precisions=(float32 bf16)
  [[ " ${args[*]} " == *" --precision all "* ]] && precisions=(float32 bf16 mixed)
  rest=()
  for ((i = 0; i < ${#args[@]}; i++)); do
    if [[ "${args[$i]}" == --precision ]]; then i=$((i + 1)); else rest+=("${args[$i]}"); fi
  done
  for ((round = 1; round <= ${ROUNDS:-3}; round++)); do
    for precision in "${precisions[@]}"; do
      "$loom" bench step "${rest[@]}" --precision "$precision" --json "$out/loom-$precision-$round.json" | grep '^step:'
    done
  done
  python3 - "$out" "${ROUNDS:-3}" "${precisions[@]}" <<'PY'
import json, statistics, sys
out, rounds, precisions = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
ratios = {p: [] for p in precisions[1:]}
for r in range(1, rounds + 1):
    times = {p: json.load(open(f"{out}/loom-{p}-{r}.json"))["median_s"] for p in precisions}
    for p in precisions[1:]:
        ratios[p].append(times["float32"] / times[p])
    print(f"round {r}: loom " + ", ".join(f"{p} {1e3 * t:.1f} ms" for p, t in times.items()))
for p, rs in ratios.items():
    print(f"loom {p} / float32 step speed: median {statistics.median(rs):.2f}x "
          f"(min {min(rs):.2f}, max {max(rs):.2f}) over {rounds} alternated rounds")
PY
  for precision in "${precisions[@]}"; do
    echo "== $precision: loom (one more run) against torch =="
    QUIET_MAX=100 bench/step.sh "${rest[@]}" --precision "$precision" | grep -E '^(step:|loom step:|torch / loom|peak RSS)'
  done
  quiet_end
  exit
fi
"$loom" bench step "${args[@]}" --json "$out/loom.json"
# The gemm ceiling of this CPU, measured now (bench/matmul_libs.cpp), and the step's
# matmul FLOPs per second as a share of it.
# (This script's own quiet check covers that run, so matmul_libs.sh's is not applied.)
if [[ " ${args[*]} " != *" --device cuda"* ]] &&
   QUIET_MAX=100 bench/matmul_libs.sh "$threads" 2>/dev/null | grep '^gemm ceiling' > "$out/ceiling.txt"; then
  cat "$out/ceiling.txt"
  python3 - "$out/loom.json" "$out/ceiling.txt" <<'PY'
import json, re, sys
loom = json.load(open(sys.argv[1]))
f32, bf16 = (float(x) for x in re.findall(r"(?:float32|bf16) (\d+) GFLOP/s", open(sys.argv[2]).read()))
# loom's JSON says "bf16 matmuls" or "mixed ..." when bf16 products ran, "float32" otherwise.
precision = "bf16" if loom.get("precision", "").startswith(("bf16", "mixed")) else "float32"
ceiling = bf16 if precision == "bf16" else f32
step = 1e3 * loom["step_tflops"]
print(f"loom step: {step:.0f} GFLOP/s of matmul FLOPs (median), {100 * step / ceiling:.0f}% of the "
      f"{precision} gemm ceiling ({ceiling:.0f} GFLOP/s)" if ceiling > 0 else
      f"loom step: {step:.0f} GFLOP/s of matmul FLOPs (median); no gemm ceiling for its precision here")
PY
fi
if "$torch_python" -c 'import torch' 2>/dev/null; then
  "$torch_python" bench/torch_step.py "${args[@]}" --json "$out/torch.json"
  "$torch_python" - "$out/loom.json" "$out/torch.json" "$peak" <<'PY'
import json, sys
loom, torch = (json.load(open(p)) for p in sys.argv[1:3])
assert loom["parameters"] == torch["parameters"], "the two models differ in size"
print(f"torch / loom step time: {torch['median_s'] / loom['median_s']:.2f} (median), "
      f"{torch['min_s'] / loom['min_s']:.2f} (min); >1: loom faster")
print(f"peak RSS: loom {loom['peak_rss_mb']:.0f} MB, torch {torch['peak_rss_mb']:.0f} MB")
peak = float(sys.argv[3])
if peak > 0:  # the same model FLOPs per step (loom's count) over each median
    flops = loom["step_tflops"] * loom["median_s"]
    print(f"model FLOP utilization on {loom['device']}: loom {100 * loom['step_tflops'] / peak:.1f}%, "
          f"torch {100 * flops / torch['median_s'] / peak:.1f}% of {peak:g} TFLOP/s")
PY
else
  echo "bench/step.sh: PyTorch not installed for $torch_python (scripts/setup --bench); loom only"
fi
quiet_end
