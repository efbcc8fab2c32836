#!/usr/bin/env bash
# Times loom's ops and PyTorch's on the Transformer's shapes in one run and prints
# one joined table (the method: tools/bench_command.cpp; the cases and their work
# formulas: the op registrations, OpInfo::bench in ops/src/<op>.cpp).
#   bench/ops.sh                       2 threads, 0.3 s per case and direction
#   bench/ops.sh --threads 1 --seconds 1 --filter matmul
# Environment: LOOM (the loom binary, default build/tools/loom), TORCH_PYTHON
# (default /usr/bin/python3, Debian's python3-torch), OUT (folder for the JSON
# files, default a temporary one). OPENBLAS_CORETYPE is passed on unchanged.
set -euo pipefail
cd "$(dirname "$0")/.."

threads=2 seconds=0.3 filter=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --threads) threads="$2"; shift 2 ;;
    --seconds) seconds="$2"; shift 2 ;;
    --filter) filter="$2"; shift 2 ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    *) echo "bench/ops.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

loom="${LOOM:-build/tools/loom}"
torch_python="${TORCH_PYTHON:-/usr/bin/python3}"
if [[ ! -x "$loom" ]]; then
  echo "bench/ops.sh: no loom binary at $loom: build first (cmake -S . -B build -G Ninja && ninja -C build)" >&2
  exit 2
fi
json_python=python3
[[ -x /usr/bin/python3 ]] && json_python=/usr/bin/python3
out="${OUT:-$(mktemp -d)}"
mkdir -p "$out"

export OMP_NUM_THREADS="$threads"
cores=$(getconf _NPROCESSORS_ONLN)
source bench/quiet.sh
quiet_start
echo "bench/ops.sh: OMP_NUM_THREADS=$OMP_NUM_THREADS OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE-(unset)}" \
     "load average: $(cut -d' ' -f1-3 /proc/loadavg) on $cores cores"

args=(--threads "$threads" --seconds "$seconds")
[[ -n "$filter" ]] && args+=(--filter "$filter")
"$loom" bench ops "${args[@]}" --json "$out/loom.json" >"$out/loom.txt"

torch_json=()
if "$torch_python" -c 'import torch' 2>/dev/null; then
  "$torch_python" bench/torch_ops.py "${args[@]}" --json "$out/torch.json" >"$out/torch.txt"
  torch_json=("$out/torch.json")
else
  echo "bench/ops.sh: PyTorch is not installed for $torch_python (scripts/setup --bench installs python3-torch);" \
       "showing loom only"
fi
echo "bench/ops.sh: load average after: $(cut -d' ' -f1-3 /proc/loadavg); JSON in $out"
echo
"$json_python" bench/join.py "$out/loom.json" "${torch_json[@]}"
quiet_end  # bench/quiet.sh: exit code 3 when the machine was not quiet
