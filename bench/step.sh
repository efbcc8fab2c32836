#!/usr/bin/env bash
# One Transformer training step, loom vs PyTorch, same model, batch and threads:
#   bench/step.sh                          'small' preset, batch 64 x 24, 2 threads
#   bench/step.sh --preset base --steps 5  (any option of `loom bench step`)
#   bench/step.sh --device cuda --peak-tflops 67   on a GPU: both on it, with model FLOP utilization
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
echo "bench/step.sh: OMP_NUM_THREADS=$OMP_NUM_THREADS OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE-(unset)}" \
     "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
"$loom" bench step "${args[@]}" --json "$out/loom.json"
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
