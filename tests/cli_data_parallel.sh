#!/usr/bin/env bash
# Data-parallel `loom train` under mpiexec: the same global batch on 1 process
# (--accum 4 --reduce exact), 2 ranks (--accum 2) and 4 ranks (--accum 1) prints the
# same steps and writes a bit-identical model; ranks started with different flags are
# refused with the value named, and an error on one rank ends the job, never a hang.
#   tests/cli_data_parallel.sh <path to the loom binary> <path to mpiexec>
set -euo pipefail
loom="$1"
mpiexec=("$2" --allow-run-as-root --oversubscribe)
test_name=cli_data_parallel
source "$(dirname "$0")/cli_lib.sh"
scratch_with_background_run
export OMP_NUM_THREADS=1  # one thread per rank: 4 ranks on CI's 2 cores

make_corpus train 120
make_corpus val 10
# Two epochs: the second ends with a partial update (missing micro-batches add zeros).
common=(--data "$dir" --preset tiny --vocab 50 --max-tokens 64 --max-len 16 --warmup 10 --log-every 1 --threads 1
        --epochs 2 --best-by loss)
# step, epoch, loss, lr and grad-norm of each progress line (the bar shares the line under mpiexec)
steps() { grep -oE 'step +[0-9]+  epoch .*' "$1" | awk '{print $2, $4, $6, $8, $10}'; }

"$loom" train "${common[@]}" --out "$dir/one" --accum 4 --reduce exact > "$dir/one.log" 2>&1 ||
  { cat "$dir/one.log"; fail "the 1-process run failed"; }
steps "$dir/one.log" > "$dir/one.txt"
[[ $(wc -l < "$dir/one.txt") -ge 4 ]] || { cat "$dir/one.log"; fail "the 1-process run printed too few steps"; }
for ranks in 2 4; do
  out="$dir/ranks$ranks"
  mkdir "$out"
  cp "$dir"/one/spm.model "$dir"/one/spm.source.json "$out"/  # the same vocabulary (reused, not retrained)
  timeout 60 "${mpiexec[@]}" -n $ranks "$loom" train "${common[@]}" --out "$out" --accum $((4 / ranks)) \
    > "$out.log" 2>&1 || { cat "$out.log"; fail "the $ranks-rank run failed"; }
  grep -q "^data parallel: $ranks ranks (mpi), exact reduction, $((4 / ranks)) micro-batches per rank per update$" \
    "$out.log" || { cat "$out.log"; fail "no 'data parallel' line at $ranks ranks"; }
  steps "$out.log" > "$out.txt"
  diff "$dir/one.txt" "$out.txt" > "$dir/diff.txt" ||
    { cat "$dir/diff.txt"; fail "$ranks ranks printed other steps than 1 process with --accum 4"; }
  cmp "$dir/one/model.safetensors" "$out/model.safetensors" ||
    fail "$ranks ranks wrote another model than 1 process with --accum 4"
done

# A rank started with another --seed (MPMD syntax): refused at start-up, naming it.
rc=0
timeout 60 "${mpiexec[@]}" -n 1 "$loom" train "${common[@]}" --out "$dir/mismatch" : \
  -n 1 "$loom" train "${common[@]}" --out "$dir/mismatch" --seed 2 > "$dir/mismatch.log" 2>&1 || rc=$?
[[ $rc -ne 0 && $rc -ne 124 ]] || { cat "$dir/mismatch.log"; fail "mismatched --seed: exit code $rc"; }
grep -q "aborting the job: train: the ranks differ in --seed: from 1 to 2" "$dir/mismatch.log" ||
  { cat "$dir/mismatch.log"; fail "mismatched --seed: the error does not name it"; }

# An error on rank 1 alone (its parameters poisoned after step 2) ends every rank.
rc=0
timeout 60 "${mpiexec[@]}" -n 1 "$loom" train "${common[@]}" --out "$dir/poisoned" : \
  -n 1 env LOOM_TEST_POISON_STEP=2 "$loom" train "${common[@]}" --out "$dir/poisoned" > "$dir/poisoned.log" 2>&1 || rc=$?
[[ $rc -ne 0 && $rc -ne 124 ]] || { cat "$dir/poisoned.log"; fail "an error on rank 1: exit code $rc"; }
grep -q "rank 1 of 2 aborting the job: train: the training loss is nan at step 3" "$dir/poisoned.log" ||
  { cat "$dir/poisoned.log"; fail "an error on rank 1: not named"; }
echo "cli_data_parallel: 1 process (--accum 4), 2 and 4 ranks: the same $(wc -l < "$dir/one.txt") steps and model bits;" \
  "a mismatched --seed refused; an error on rank 1 ended the job"
