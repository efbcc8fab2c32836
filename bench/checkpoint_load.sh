#!/usr/bin/env bash
# What verifying each tensor's CRC-32 costs when a model is loaded: `loom translate` of an
# empty input (load the folder, decode nothing) of a base-preset model, with and without
# --skip-checksums, alternated in the same run.
#   bench/checkpoint_load.sh [--data DIR] [--preset base|big] [--runs N]
# DIR holds train/val .de and .en (default ../shared/data/multi30k); the model is trained
# for one step (its weights do not matter here) into $TMPDIR.
set -euo pipefail
cd "$(dirname "$0")/.."
data=../shared/data/multi30k preset=base runs=5
while [[ $# -gt 0 ]]; do
  case "$1" in
    --data) data="$2"; shift 2 ;;
    --preset) preset="$2"; shift 2 ;;
    --runs) runs="$2"; shift 2 ;;
    *) echo "bench/checkpoint_load.sh: unknown argument '$1' (--data DIR, --preset base|big, --runs N)" >&2; exit 2 ;;
  esac
done
loom=${LOOM:-build/tools/loom}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$loom" train --data "$data" --out "$out/model" --preset "$preset" --max-steps 1 --max-tokens 256 --warmup 10 \
  --best-by loss --threads 2 > "$out/train.log" 2>&1 || { cat "$out/train.log"; exit 1; }
echo "bench/checkpoint_load.sh: $preset model, $(stat -c %s "$out/model/model.safetensors") bytes; $(lscpu | sed -n 's/^Model name: *//p')"
touch "$out/empty"
# Alternated, so both share the machine's drift; the median of each.
for ((i = 0; i < runs; i++)); do
  for mode in verify skip; do
    flag=(); [[ $mode == skip ]] && flag=(--skip-checksums)
    start=$(date +%s.%N)
    "$loom" translate --model "$out/model" --input "$out/empty" "${flag[@]}" > /dev/null
    awk -v end="$(date +%s.%N)" -v start="$start" 'BEGIN { print end - start }' >> "$out/$mode.s"
  done
done
median() { sort -g "$1" | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
verify=$(median "$out/verify.s") skip=$(median "$out/skip.s")
echo "load + exit, median of $runs: verified $verify s, --skip-checksums $skip s (verified / skipped: $(awk -v a="$verify" -v b="$skip" 'BEGIN { printf "%.3f", a / b }'))"
