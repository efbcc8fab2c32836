#!/usr/bin/env bash
# Data-parallel `loom train` under mpiexec: the same global batch on 1 process
# (--accum 4 --reduce exact), 2 ranks (--accum 2) and 4 ranks (--accum 1) prints the
# same steps and writes a bit-identical model (3 ranks too, against --accum 3 and 6), also when stopped and resumed on another
# number of ranks; ranks started with different flags are refused with the value named,
# and an error on one rank or a killed one ends the job, never a hang.
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
# 2 and 4 ranks in 25 MiB buckets (one here), then 2 ranks in buckets of 0.004 MiB
# (dozens) summed while backward runs (a communication thread) or after it.
while read -r name ranks bucket_mb overlap; do
  out="$dir/$name"
  mkdir "$out"
  cp -r "$dir"/one/corpus "$out"/  # the same prepared corpus (reused, not prepared again)
  timeout 60 "${mpiexec[@]}" -n $ranks "$loom" train "${common[@]}" --out "$out" --accum $((4 / ranks)) \
    --bucket-mb $bucket_mb --overlap $overlap < /dev/null > "$out.log" 2>&1 || { cat "$out.log"; fail "$name: the run failed"; }
  grep -q "^data parallel: $ranks ranks (mpi), exact reduction, $((4 / ranks)) micro-batches per rank per update$" \
    "$out.log" || { cat "$out.log"; fail "$name: no 'data parallel' line"; }
  when=$([[ $overlap == on ]] && echo "while backward runs \(a communication thread\)" || echo "after backward")
  grep -qE "^gradient buckets: [0-9]+ of up to $bucket_mb MiB, summed across ranks $when$" "$out.log" ||
    { cat "$out.log"; fail "$name: no 'gradient buckets' line"; }
  steps "$out.log" > "$out.txt"
  diff "$dir/one.txt" "$out.txt" > "$dir/diff.txt" ||
    { cat "$dir/diff.txt"; fail "$name printed other steps than 1 process with --accum 4"; }
  cmp "$dir/one/model.safetensors" "$out/model.safetensors" || fail "$name wrote another model than 1 process"
  # Each logged step says how long the reduction across ranks took, and how long the step waited for it.
  for field in comm_ms reduce_ms; do
    grep -qE "\"$field\":0\.[0-9]*[1-9]|\"$field\":[1-9]" "$out/metrics.jsonl" ||
      { head -3 "$out/metrics.jsonl"; fail "$name: no $field in metrics.jsonl"; }
  done
done <<'CASES'
ranks2 2 25 on
ranks4 4 25 on
buckets-on 2 0.004 on
buckets-off 2 0.004 off
CASES

# Any number of ranks: 3 ranks of 1 and of 2 micro-batches per update (then subtrees
# of the tree straddle ranks) write 1 process's model with --accum 3 and 6; --reduce
# fast at 3 ranks trains too, and prints the same losses (they are summed exactly).
for accum in 1 2; do
  global=$((3 * accum))
  mkdir "$dir/one-$global" "$dir/ranks3-$accum"
  cp -r "$dir"/one/corpus "$dir/one-$global"/
  cp -r "$dir"/one/corpus "$dir/ranks3-$accum"/
  "$loom" train "${common[@]}" --out "$dir/one-$global" --accum $global --reduce exact > "$dir/one-$global.log" 2>&1 ||
    { cat "$dir/one-$global.log"; fail "1 process with --accum $global failed"; }
  timeout 60 "${mpiexec[@]}" -n 3 "$loom" train "${common[@]}" --out "$dir/ranks3-$accum" --accum $accum \
    < /dev/null > "$dir/ranks3-$accum.log" 2>&1 || { cat "$dir/ranks3-$accum.log"; fail "3 ranks x $accum failed"; }
  diff <(steps "$dir/one-$global.log") <(steps "$dir/ranks3-$accum.log") > "$dir/diff.txt" ||
    { cat "$dir/diff.txt"; fail "3 ranks x $accum printed other steps than 1 process with --accum $global"; }
  cmp "$dir/one-$global/model.safetensors" "$dir/ranks3-$accum/model.safetensors" ||
    fail "3 ranks x $accum wrote another model than 1 process with --accum $global"
done
mkdir "$dir/ranks3-fast"
cp -r "$dir"/one/corpus "$dir/ranks3-fast"/
timeout 60 "${mpiexec[@]}" -n 3 "$loom" train "${common[@]}" --out "$dir/ranks3-fast" --accum 1 --reduce fast \
  < /dev/null > "$dir/ranks3-fast.log" 2>&1 || { cat "$dir/ranks3-fast.log"; fail "3 ranks with --reduce fast failed"; }
grep -q "^data parallel: 3 ranks (mpi), fast reduction, 1 micro-batches per rank per update$" "$dir/ranks3-fast.log" ||
  { cat "$dir/ranks3-fast.log"; fail "3 ranks with --reduce fast: no 'data parallel' line"; }
[[ $(steps "$dir/ranks3-fast.log" | head -1 | cut -d' ' -f3) == $(steps "$dir/one-3.log" | head -1 | cut -d' ' -f3) ]] ||
  fail "3 ranks with --reduce fast: step 1's loss is not 1 process's"

# A rank started with another option (MPMD syntax): refused at start-up, naming it
# and both values; --max-steps too (ranks that stop apart would hang in a collective).
while read -r flag value named; do
  rc=0
  timeout 60 "${mpiexec[@]}" -n 1 "$loom" train "${common[@]}" --out "$dir/mismatch" : \
    -n 1 "$loom" train "${common[@]}" --out "$dir/mismatch" "$flag" "$value" > "$dir/mismatch.log" 2>&1 || rc=$?
  [[ $rc -ne 0 && $rc -ne 124 ]] || { cat "$dir/mismatch.log"; fail "mismatched $flag: exit code $rc"; }
  grep -qF "aborting the job: train: the ranks differ in $flag: $named" "$dir/mismatch.log" ||
    { cat "$dir/mismatch.log"; fail "mismatched $flag: the error does not name it"; }
done <<'CASES'
--seed 2 from 1 to 2
--dropout 0.3 from -1 to 0.3
--max-steps 3 from 0 to 3
--reduce fast from auto to fast
CASES

# An error on rank 1 alone (its parameters poisoned after step 2) ends every rank.
rc=0
timeout 60 "${mpiexec[@]}" -n 1 "$loom" train "${common[@]}" --out "$dir/poisoned" : \
  -n 1 env LOOM_TEST_POISON_STEP=2 "$loom" train "${common[@]}" --out "$dir/poisoned" > "$dir/poisoned.log" 2>&1 || rc=$?
[[ $rc -ne 0 && $rc -ne 124 ]] || { cat "$dir/poisoned.log"; fail "an error on rank 1: exit code $rc"; }
grep -q "rank 1 of 2 aborting the job: train: the training loss is nan at step 3" "$dir/poisoned.log" ||
  { cat "$dir/poisoned.log"; fail "an error on rank 1: not named"; }
# Resumed on another number of ranks, --accum left out (it follows: the run's 4
# micro-batches per update kept): stopped after 2 updates on 4 ranks and resumed in 1
# process, and stopped in 1 process and resumed on 2 ranks; both end on the
# uninterrupted run's steps and model bits.
resumed_case() {  # <name> <ranks first> <ranks then> [flags for both parts]
  local out="$dir/$1" first=() then=() flags=("${@:4}")
  (($2 > 1)) && first=(timeout 60 "${mpiexec[@]}" -n "$2")
  (($3 > 1)) && then=(timeout 60 "${mpiexec[@]}" -n "$3")
  mkdir "$out"
  cp -r "$dir"/one/corpus "$out"/
  "${first[@]}" "$loom" train "${common[@]}" --out "$out" --accum $((4 / $2)) --reduce exact --max-steps 2 \
    "${flags[@]}" > "$out.log" 2>&1 || { cat "$out.log"; fail "$1: the first part failed"; }
  "${then[@]}" "$loom" train --resume "$out" --max-steps 0 "${flags[@]}" > "$out.resumed.log" 2>&1 ||
    { cat "$out.resumed.log"; fail "$1: the resumed part failed"; }
  (steps "$out.log"; steps "$out.resumed.log") > "$out.txt"
  diff "$dir/one.txt" "$out.txt" > "$dir/diff.txt" || { cat "$dir/diff.txt"; fail "$1: other steps than 1 process"; }
  cmp "$dir/one/model.safetensors" "$out/model.safetensors" || fail "$1: another model than 1 process"
}
resumed_case ranks4-then-1 4 1
resumed_case ranks1-then-2 1 2
# --shard-optimizer: each rank keeps and updates Adam's moments for its share of the
# parameters; the same bits, a state saved whole (gathered) and resumed at any size.
resumed_case sharded4-then-2 4 2 --shard-optimizer
shard=$(grep -oE "^optimizer state: Adam's moments sharded, [0-9.]+ MiB on rank 0 of [0-9.]+ MiB$" \
  "$dir/sharded4-then-2.log" | awk '{print $6, $12}')
awk -v s="$shard" 'BEGIN { split(s, m, " "); exit !(m[1] > 0 && m[1] < m[2] / 2) }' ||
  { cat "$dir/sharded4-then-2.log"; fail "--shard-optimizer: rank 0 keeps no less than half the moments ($shard)"; }
# Checkpoints by time (--save-minutes) on 2 sharded ranks: each rank's clock, saved when
# any says so, so the collective save never leaves a rank waiting.
mkdir "$dir/timed"
cp -r "$dir"/one/corpus "$dir/timed"/
timeout 60 "${mpiexec[@]}" -n 2 "$loom" train "${common[@]}" --out "$dir/timed" --accum 2 --shard-optimizer \
  --save-minutes 0.00001 --max-steps 3 > "$dir/timed.log" 2>&1 || { cat "$dir/timed.log"; fail "--save-minutes: failed"; }
[[ $(grep -c "validation loss .*saved" "$dir/timed.log") -ge 3 ]] ||
  { cat "$dir/timed.log"; fail "--save-minutes on 2 sharded ranks: fewer than 3 checkpoints in 3 steps"; }

# Refused, naming why: an --accum that changes the update, and a one-process run
# (--reduce off) on 2 ranks.
rc=0
timeout 60 "${mpiexec[@]}" -n 2 "$loom" train --resume "$dir/ranks1-then-2" --accum 1 > "$dir/accum.log" 2>&1 || rc=$?
[[ $rc -ne 0 && $rc -ne 124 ]] || { cat "$dir/accum.log"; fail "--accum 1 on 2 ranks resumed: exit code $rc"; }
grep -q "accum 1 on 2 rank(s) makes 2 micro-batches per update, the run makes 4 (leave --accum out: it becomes 2)" \
  "$dir/accum.log" || { cat "$dir/accum.log"; fail "--accum 1 on 2 ranks resumed: not named"; }
mkdir "$dir/off"
cp -r "$dir"/one/corpus "$dir/off"/
"$loom" train "${common[@]}" --out "$dir/off" --accum 4 --max-steps 1 > "$dir/off.log" 2>&1 ||
  { cat "$dir/off.log"; fail "the --reduce off run failed"; }
rc=0
timeout 60 "${mpiexec[@]}" -n 2 "$loom" train --resume "$dir/off" > "$dir/off.resumed.log" 2>&1 || rc=$?
[[ $rc -ne 0 && $rc -ne 124 ]] || { cat "$dir/off.resumed.log"; fail "an --reduce off run on 2 ranks: exit code $rc"; }
grep -q "trained in one process with --reduce off, which 2 ranks cannot continue" "$dir/off.resumed.log" ||
  { cat "$dir/off.resumed.log"; fail "an --reduce off run on 2 ranks: not named"; }

# A rank killed (SIGKILL) mid-run ends the job with the rank named, and the run
# folder's last checkpoint stays whole: a translation reads it.
rank_pid() {  # <rank> <out folder>: that rank's process
  local d
  for d in /proc/[0-9]*; do
    tr '\0' ' ' < "$d/cmdline" 2> /dev/null | grep -q -- "--out $2 " || continue
    tr '\0' '\n' < "$d/environ" 2> /dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$1" && { echo "${d#/proc/}"; return; }
  done
}
long=("${common[@]}")  # the same run, with epochs enough to be killed in
for i in "${!long[@]}"; do [[ ${long[$i]} == --epochs ]] && long[$((i + 1))]=1000; done
out="$dir/killed"
mkdir "$out"
cp -r "$dir"/one/corpus "$out"/
timeout 60 "${mpiexec[@]}" -n 2 "$loom" train "${long[@]}" --out "$out" --accum 2 --save-every 2 \
  > "$out.log" 2>&1 &
pid=$!
wait_for_line "step \+7 " "$out.log"
victim=$(rank_pid 1 "$out")
[[ -n $victim ]] || { cat "$out.log"; fail "no rank 1 process found to kill"; }
kill -9 "$victim"
rc=0
wait "$pid" || rc=$?
pid=""
[[ $rc -ne 0 && $rc -ne 124 ]] || { cat "$out.log"; fail "a killed rank: exit code $rc"; }
grep -q "process rank 1 with PID [0-9]* on node .* exited on signal 9" "$out.log" || { cat "$out.log"; fail "a killed rank: not named"; }
echo "Hund" > "$dir/one.de"
"$loom" translate --model "$out" --input "$dir/one.de" --output "$dir/one.hyp" > "$dir/translate.log" 2>&1 ||
  { cat "$dir/translate.log"; fail "after a killed rank, the run's checkpoint does not load"; }

echo "cli_data_parallel: 1 process (--accum 4), 2 and 4 ranks: the same $(wc -l < "$dir/one.txt") steps and model bits;" \
  "resumed 4 -> 1, 1 -> 2 and sharded 4 -> 2 ranks on the same bits; a mismatched --seed, a changed update and an --reduce off run" \
  "on 2 ranks refused; an error on rank 1 and a killed rank 1 ended the job, its checkpoint intact"
