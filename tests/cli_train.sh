#!/usr/bin/env bash
# `loom train` as a long run uses it: Ctrl-C (SIGINT) saves the training state
# and exits with 130; `--resume` continues and prints the same steps (loss,
# learning rate, gradient norm) as a run that never stopped; a resumed run keeps
# the options its updates depend on; a run that diverges stops with an error
# naming the step and leaves the last good checkpoint's bytes as they were.
#   tests/cli_train.sh <path to the loom binary>
set -euo pipefail
loom="$1"
test_name=cli_train
source "$(dirname "$0")/cli_lib.sh"
scratch_with_background_run

make_corpus train 300
make_corpus val 20
common=(--data "$dir" --preset tiny --vocab 60 --max-tokens 64 --max-len 16 --warmup 10 --log-every 1 --threads 2 --epochs 1000
        --save-every 7)
# step, epoch, loss, lr and grad-norm of each progress line (the rest is speed and memory)
steps() { grep -E '^step +[0-9]+  epoch ' "$1" | awk '{print $2, $4, $6, $8, $10}'; }

"$loom" train "${common[@]}" --out "$dir/straight" --max-steps 30 > "$dir/straight.log" 2>&1 ||
  { cat "$dir/straight.log"; fail "the uninterrupted run failed"; }
[[ $(steps "$dir/straight.log" | wc -l) -eq 30 ]] || { cat "$dir/straight.log"; fail "expected 30 progress lines"; }

# The same run, interrupted by SIGINT once it has printed step 5, then resumed up to step 30.
"$loom" train "${common[@]}" --out "$dir/stopped" --max-steps 100000 > "$dir/stopped.log" 2>&1 &
pid=$!
wait_for_line '^step      5 ' "$dir/stopped.log"
kill -INT $pid
rc=0
wait $pid || rc=$?
pid=""
[[ $rc -eq 130 ]] || { cat "$dir/stopped.log"; fail "SIGINT: exit code $rc, expected 130"; }
grep -q "^interrupted after step [0-9]*: saved '$dir/stopped/training_state.safetensors'; \`loom train --resume $dir/stopped\` continues" \
  "$dir/stopped.log" || { cat "$dir/stopped.log"; fail "no 'interrupted' line"; }
stopped_at=$(sed -n 's/^interrupted after step \([0-9]*\):.*/\1/p' "$dir/stopped.log")
"$loom" train --resume "$dir/stopped" --max-steps 30 > "$dir/resumed.log" 2>&1 ||
  { cat "$dir/resumed.log"; fail "the resumed run failed"; }
grep -q "^resuming '$dir/stopped' at step $stopped_at (de -> en, data '$dir')" "$dir/resumed.log" ||
  { cat "$dir/resumed.log"; fail "no 'resuming' line"; }
{ steps "$dir/stopped.log" | awk '$1 <= 30'; steps "$dir/resumed.log"; } > "$dir/joined.txt"
steps "$dir/straight.log" > "$dir/straight.txt"
diff "$dir/straight.txt" "$dir/joined.txt" > "$dir/diff.txt" ||
  { cat "$dir/diff.txt"; fail "stopped at step $stopped_at and resumed, the run printed other steps than the run that never stopped"; }
cmp -s "$dir/straight/model.safetensors" "$dir/stopped/model.safetensors" ||
  fail "the resumed run's final model differs from the uninterrupted run's"

# A resumed run keeps the options its updates depend on.
rc=0
"$loom" train --resume "$dir/stopped" --seed 5 --max-steps 31 > /dev/null 2> "$dir/err.txt" || rc=$?
[[ $rc -eq 1 ]] && grep -q "loom: error: train: --seed 5 differs from the resumed run's 1" "$dir/err.txt" ||
  { cat "$dir/err.txt"; fail "--resume with another --seed: exit code $rc"; }
rc=0
"$loom" train --resume "$dir/nowhere" > /dev/null 2> "$dir/err.txt" || rc=$?
[[ $rc -eq 1 ]] && grep -q "loom: error: train: --resume '$dir/nowhere': no training state '$dir/nowhere/training_state.safetensors'" \
  "$dir/err.txt" || { cat "$dir/err.txt"; fail "--resume of a folder without a state: exit code $rc"; }

# Divergence: a parameter turned NaN after update 9 (LOOM_TEST_POISON_STEP) makes
# step 10's loss NaN; the checkpoint of step 7 stays, byte for byte.
"$loom" train "${common[@]}" --out "$dir/good" --max-steps 7 > /dev/null 2>&1 || fail "the step-7 run failed"
rc=0
LOOM_TEST_POISON_STEP=9 "$loom" train "${common[@]}" --out "$dir/diverged" --max-steps 30 > "$dir/diverged.log" \
  2> "$dir/err.txt" || rc=$?
[[ $rc -eq 1 ]] || { cat "$dir/err.txt"; fail "a diverged run: exit code $rc, expected 1"; }
grep -q "^loom: error: train: the training loss is nan at step 10 (learning rate [0-9.e-]*); stopped without saving: '$dir/diverged/model.safetensors' keeps step 7$" \
  "$dir/err.txt" || { cat "$dir/err.txt"; fail "the divergence error does not name the step and the checkpoint kept"; }
cmp -s "$dir/good/model.safetensors" "$dir/diverged/model.safetensors" ||
  fail "the diverged run changed the checkpoint of step 7"

# --progress: auto draws the bar on a terminal (here a pty from `script`) but not under a
# launcher (mpirun and Slurm give ranks a pty whose output goes to a log); bar draws it into a
# file; off prints no step lines (the validation line stays).
progress_run() {  # progress_run <name> <env...> -- <train flags...>: the run's output, as a terminal saw it
  local name=$1; shift
  local envs=(); while [[ $1 != -- ]]; do envs+=("$1"); shift; done; shift
  script -qec "env ${envs[*]} '$loom' train ${common[*]} --out '$dir/$name' --max-steps 3 $*" /dev/null \
    > "$dir/$name.log" 2>&1 < /dev/null || { cat "$dir/$name.log"; fail "--progress $name: the run failed"; }
}
escape=$'\033[2K'
progress_run tty LOOM_NONE=1 --
grep -qF "$escape" "$dir/tty.log" || fail "--progress auto on a terminal drew no bar"
progress_run launcher SLURM_PROCID=0 --
! grep -qF "$escape" "$dir/launcher.log" || fail "--progress auto under a launcher drew the bar into its log"
grep -qE '^step +3  epoch ' "$dir/launcher.log" || { cat "$dir/launcher.log"; fail "no plain step lines under a launcher"; }
progress_run lines LOOM_NONE=1 -- --progress lines
! grep -qF "$escape" "$dir/lines.log" || fail "--progress lines drew a bar"
"$loom" train "${common[@]}" --out "$dir/bar" --max-steps 3 --progress bar > "$dir/bar.log" 2>&1 || fail "--progress bar failed"
grep -qF "$escape" "$dir/bar.log" || fail "--progress bar drew no bar into a file"
"$loom" train "${common[@]}" --out "$dir/off" --max-steps 3 --progress off > "$dir/off.log" 2>&1 || fail "--progress off failed"
! grep -qE '^step +[0-9]+  epoch ' "$dir/off.log" || { cat "$dir/off.log"; fail "--progress off printed step lines"; }
grep -qE '^step +3: validation loss' "$dir/off.log" || { cat "$dir/off.log"; fail "--progress off dropped the validation line"; }
echo "cli_train: SIGINT saved at step $stopped_at, the resumed run printed the same 30 steps; --resume checks; divergence kept step 7; --progress auto/lines/bar/off"
