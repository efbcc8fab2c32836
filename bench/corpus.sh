#!/usr/bin/env bash
# Corpora of millions of pairs: synthetic corpora made by repeating
# Multi30k's training set (each copy's pairs shuffled, a fixed seed; about half WMT's
# sentence length, so tokens/s is quoted too), then for each size
#   - `loom data prepare`: wall time, pairs/s and tokens/s, peak RSS;
#   - `loom train --data STORE --preset small --max-steps 20`: time from the start of
#     the process to its first logged step, peak RSS, and the RSS outside the caching
#     allocator's cache at the last step (what the corpus and the run hold; the cache
#     follows the shapes of the batches drawn, which differ between corpora); one process x 2 threads, and
#     (with mpirun) 2 ranks x 1 thread (the peak RSS of one rank);
#   - with BEFORE=<a loom binary from before stores>: the same run from the corpus
#     folder, as that binary did it (the whole corpus in memory), for sizes up to
#     BEFORE_MAX pairs (default: all; 4.5M pairs took it ~17 GB).
#   bench/corpus.sh                     29k, 1.45M and 4.5M pairs
#   bench/corpus.sh 29000 290000        the sizes given
#   REUSE=1 bench/corpus.sh             the stores already in WORK trained from, not prepared again
# Environment: LOOM (build/tools/loom), BEFORE (unset: not measured), DATA
# (../shared/data/multi30k), WORK (a scratch folder, default /tmp/loom-corpus-bench:
# 4.5M pairs take ~1.5 GB of text and ~0.6 GB of store). Needs GNU time (scripts/setup --bench).
set -euo pipefail
cd "$(dirname "$0")/.."
loom=$(realpath "${LOOM:-build/tools/loom}")
data=$(realpath "${DATA:-../shared/data/multi30k}")
work=${WORK:-/tmp/loom-corpus-bench}
sizes=("$@")
[[ ${#sizes[@]} -gt 0 ]] || sizes=(29000 1450000 4500000)
[[ -x /usr/bin/time ]] || { echo "bench/corpus.sh: needs GNU time (scripts/setup --bench)" >&2; exit 2; }
mkdir -p "$work"

# corpus <pairs>: $work/corpus-<pairs>/train.{de,en} (copies of Multi30k's, each shuffled) and val.
corpus() {
  local n=$1 out="$work/corpus-$1" copy=0
  [[ -s "$out/train.en" ]] && return
  mkdir -p "$out"
  paste <(zcat -f "$data"/train.de*) <(zcat -f "$data"/train.en*) > "$out/pairs.tsv"
  : > "$out/all.tsv"
  while (($(wc -l < "$out/all.tsv") < n)); do
    shuf --random-source=<(yes "$copy") "$out/pairs.tsv" >> "$out/all.tsv"
    copy=$((copy + 1))
  done
  head -n "$n" "$out/all.tsv" | cut -f1 > "$out/train.de"
  head -n "$n" "$out/all.tsv" | cut -f2 > "$out/train.en"
  rm "$out/pairs.tsv" "$out/all.tsv"
  cp "$data"/val.de* "$data"/val.en* "$out/"
}

# timed <log> <command...>: runs it with each output line stamped (a progress bar's
# redraws are lines too); prints "<wall s> <peak RSS MiB> <s to the 'model:' line, the
# run set up> <s to the first update done (a 'step' line, or the bar at 1/N)> <RSS
# minus the allocator's cache at the last 'step' line, MiB>".
timed() {
  local log=$1
  shift
  local start=$EPOCHREALTIME
  # (mpirun gives the ranks a terminal: the bar's escape codes are taken out.)
  /usr/bin/time -f "%e %M" -o "$log.time" "$@" 2>&1 | stdbuf -o0 tr '\r' '\n' | stdbuf -o0 sed 's/\x1b\[[0-9;]*[A-Za-z]//g' |
    while IFS= read -r line; do echo "$EPOCHREALTIME $line"; done > "$log"
  local setup first outside
  setup=$(awk -v start="$start" '$2 == "model:" { printf "%.2f", $1 - start; exit }' "$log")
  first=$(awk -v start="$start" '$2 == "step" || / 1\/[0-9]+ / { printf "%.2f", $1 - start; exit }' "$log")
  outside=$(sed -nE 's/.* cached ([0-9]+) MiB, RSS ([0-9]+) MiB.*/\1 \2/p' "$log" | awk '{ d = $2 - $1 } END { print d }')
  awk -v setup="${setup:--}" -v first="${first:--}" -v outside="${outside:--}" \
    '{ printf "%.1f %.0f %s %s %s\n", $1, $2 / 1024, setup, first, outside }' "$log.time"
}

train=(train --preset small --max-steps 20 --log-every 1 --best-by loss --epochs 1)
row() { printf '%-9s %-28s %8s %9s %8s %12s %11s %s\n' "$@"; }
row pairs what "wall s" "RSS MiB" "setup s" "first step s" "outside MiB" rate
for n in "${sizes[@]}"; do
  corpus "$n"
  dir="$work/corpus-$n" store="$work/store-$n"
  rm -rf "$work"/run-"$n"-*
  if [[ -z ${REUSE:-} || ! -e "$store/manifest.json" ]]; then
    rm -rf "$store"
    read -r wall rss _ _ _ < <(timed "$work/prepare-$n.log" "$loom" data prepare --data "$dir" --out "$store" --threads 2)
    tokens=$(python3 -c "import json; print(json.load(open('$store/manifest.json'))['tokens'])")
    row "$n" "data prepare" "$wall" "$rss" - - - \
      "$(awk -v n="$n" -v t="$tokens" -v s="$wall" 'BEGIN { printf "%.0f pairs/s, %.0f tokens/s", n / s, t / s }')"
  fi
  read -r wall rss setup first outside < <(timed "$work/run-$n-store.log" "$loom" "${train[@]}" --data "$store" --threads 2 --out "$work/run-$n-store")
  row "$n" "train --data STORE" "$wall" "$rss" "$setup" "$first" "$outside"
  if command -v mpirun > /dev/null; then
    # Each rank's own peak (GNU time around each), the larger one shown; the step lines are rank 0's.
    read -r wall _ setup first outside < <(timed "$work/run-$n-mpi.log" mpirun --allow-run-as-root -np 2 bash -c \
      '/usr/bin/time -f %M -o "$0.$OMPI_COMM_WORLD_RANK" "$@"' "$work/run-$n-mpi.rss" \
      "$loom" "${train[@]}" --data "$store" --threads 1 --out "$work/run-$n-mpi")
    row "$n" "train, 2 ranks (per rank)" "$wall" \
      "$(($(cat "$work/run-$n-mpi.rss".* | sort -n | tail -1) / 1024))" "$setup" "$first" "$outside"
  fi
  if [[ -n ${BEFORE:-} ]] && ((n <= ${BEFORE_MAX:-n})); then
    read -r wall rss setup first outside < <(timed "$work/run-$n-before.log" "$BEFORE" "${train[@]}" --data "$dir" --threads 2 --out "$work/run-$n-before")
    row "$n" "before: train --data DIR" "$wall" "$rss" "$setup" "$first" "$outside"
  fi
done
