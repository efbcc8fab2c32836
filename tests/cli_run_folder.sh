#!/usr/bin/env bash
# No run is ever lost: a new run never overwrites a folder that holds a
# run; one run at a time writes in a folder (a lock naming its holder); temporaries
# of a writer that died are swept on start-up; a leftover vocabulary is reused only
# for the same corpus and size; cheap checks come before any vocabulary is trained;
# and SIGINT / SIGTERM at random moments always end in a clean save (exit 130 / 143).
#   tests/cli_run_folder.sh <path to the loom binary> [signals, default 12]
set -euo pipefail
loom="$1"
signals="${2:-12}"
test_name=cli_run_folder
source "$(dirname "$0")/cli_lib.sh"
scratch_with_background_run

make_corpus train 200
make_corpus val 20
common=(--data "$dir" --preset tiny --vocab 60 --max-tokens 64 --max-len 16 --warmup 10 --threads 2)
# run <exit code> <text stderr must contain> <command...>
run() {
  local want_rc=$1 want=$2 rc=0
  shift 2
  "$@" > "$dir/stdout.txt" 2> "$dir/stderr.txt" || rc=$?
  [[ $rc -eq $want_rc ]] || { cat "$dir/stdout.txt" "$dir/stderr.txt"; fail "'${*:2}': exit code $rc, expected $want_rc"; }
  [[ -z $want ]] || grep -qF -- "$want" "$dir/stderr.txt" "$dir/stdout.txt" ||
    { cat "$dir/stdout.txt" "$dir/stderr.txt"; fail "'${*:2}': the output lacks: $want"; }
}

run 0 "" "$loom" train "${common[@]}" --out "$dir/done" --max-steps 3 --keep-last 2 --save-every 1
sha256sum "$dir/done/model.safetensors" "$dir/done/training_state.safetensors" > "$dir/done.sha"

# 3. A new run into a finished run's folder is refused, naming --resume; nothing changes.
run 1 "train: '$dir/done' already holds a run (model.safetensors, training_state.safetensors, best" \
  "$loom" train "${common[@]}" --out "$dir/done" --max-steps 3
grep -qF "continue it with \`loom train --resume $dir/done\`, or start afresh with another --out" "$dir/stderr.txt" ||
  fail "the refusal does not say how to continue or start afresh"
sha256sum -c --quiet "$dir/done.sha" || fail "a refused run changed the finished run's files"
# ... also when the folder holds only kept step-N checkpoints (no --keep-last in the new run).
mkdir -p "$dir/kept" && cp "$dir"/done/step-*.safetensors "$dir/kept/"
run 1 "train: '$dir/kept' already holds a run (step-0000000" "$loom" train "${common[@]}" --out "$dir/kept" --max-steps 1

# 4. Two runs into one folder at once: the second is refused, naming the first (its pid).
"$loom" train "${common[@]}" --out "$dir/busy" --max-steps 100000 --epochs 1000 > "$dir/busy.log" 2>&1 &
pid=$!
wait_for_line '^step ' "$dir/busy.log"
run 1 "train: the run folder '$dir/busy' is in use by another loom (pid $pid on " \
  "$loom" train "${common[@]}" --out "$dir/busy" --max-steps 1
run 1 "is in use by another loom (pid $pid" "$loom" train --resume "$dir/busy" --max-steps 1
kill -INT $pid; rc=0; wait $pid || rc=$?; pid=""
[[ $rc -eq 130 ]] || { cat "$dir/busy.log"; fail "the first run, interrupted: exit code $rc"; }
# The lock went with its holder: the run continues.
run 0 "resuming '$dir/busy'" "$loom" train --resume "$dir/busy" --max-steps 1000000 --epochs 1 --log-every 1000

# Two runs on one corpus train byte-identical vocabularies (no temporary name inside),
# so `loom average` takes their checkpoints together.
cmp -s "$dir/done/spm.model" "$dir/busy/spm.model" || fail "two runs' vocabularies of one corpus differ"
run 0 "averaged 2 checkpoints" "$loom" average --out "$dir/averaged" "$dir/done" "$dir/busy"
# `loom average --validated RUN`: the kept checkpoints that were validated (here --save-every 3's,
# steps 3 and 6), not the --keep-every 2 snapshots between them (steps 2 and 4).
run 0 "" "$loom" train "${common[@]}" --out "$dir/mixed" --max-steps 6 --keep-every 2 --save-every 3 --keep-last 6
[[ $(cd "$dir/mixed" && echo step-*.safetensors) == "step-00000002.safetensors step-00000003.safetensors \
step-00000004.safetensors step-00000006.safetensors" ]] || fail "kept: $(cd "$dir/mixed" && echo step-*)"
run 0 "average: the validated checkpoints of '$dir/mixed': steps 3, 6" \
  "$loom" average --validated "$dir/mixed" --out "$dir/validated"
run 0 "averaged 2 checkpoints" "$loom" average --out "$dir/by-hand" "$dir"/mixed/step-0000000{3,6}.safetensors
cmp -s "$dir/validated/model.safetensors" "$dir/by-hand/model.safetensors" ||
  fail "--validated averaged other checkpoints than steps 3 and 6"
run 1 "average: --validated '$dir/busy' has 0 validated kept checkpoint(s)" \
  "$loom" average --validated "$dir/busy" --out "$dir/none"
run 2 "excludes" "$loom" average --validated "$dir/mixed" "$dir/done" --out "$dir/none"
run 2 "give two or more checkpoints, or --validated RUN" "$loom" average "$dir/done" --out "$dir/none"
[[ ! -e "$dir/none" ]] || fail "a refused average left its --out folder"

# 2. A temporary left by a writer that died (a second SIGINT during a save) is removed on start-up.
cp -r "$dir/done" "$dir/leftover"
: > "$dir/leftover/training_state.safetensors.tmp.999999999"
: > "$dir/leftover/best/model.safetensors.tmp.999999998"
run 0 "train: removed '$dir/leftover/training_state.safetensors.tmp.999999999', left by a writer that died" \
  "$loom" train --resume "$dir/leftover" --max-steps 4
[[ -z $(find "$dir/leftover" -name '*.tmp.*') ]] || fail "temporaries left: $(find "$dir/leftover" -name '*.tmp.*')"

# --resume with nothing left to do says so; --resume with another --out is refused; a run
# started with a relative --data resumes from elsewhere (it trains from its own store,
# <out>/corpus); without that store (a folder from before stores) it asks for --data.
run 0 "train: --resume '$dir/done': nothing left to do, the run is at step 3" "$loom" train --resume "$dir/done"
run 1 "train: --resume '$dir/done' continues that folder's run; --out '$dir/other' would be ignored" \
  "$loom" train --resume "$dir/done" --out "$dir/other"
mkdir -p "$dir/corpus" && cp "$dir"/train.* "$dir"/val.* "$dir/corpus/"
(cd "$dir" && "$loom" train --data corpus --out rel --preset tiny --vocab 60 --max-tokens 64 --max-len 16 \
  --max-steps 2 --threads 2 > /dev/null)
cp -r "$dir/rel" "$dir/rel_old" && rm -r "$dir/rel_old/corpus"
run 0 "train: 200 sentence pairs (de -> en, store '$dir/rel/corpus')" "$loom" train --resume "$dir/rel" --max-steps 3
run 1 "train: --resume '$dir/rel_old': the run's corpus folder 'corpus' is not found from here (a path relative to" \
  "$loom" train --resume "$dir/rel_old" --max-steps 3
run 0 "corpus: the run has no prepared store; preparing '$dir/rel_old/corpus' from '$dir/corpus' with its vocabulary" \
  "$loom" train --resume "$dir/rel_old" --max-steps 3 --data "$dir/corpus"
cmp "$dir/rel/model.safetensors" "$dir/rel_old/model.safetensors" ||
  fail "a run resumed from a store it prepared then differs from one resumed from the store it had"
sha256sum -c --quiet "$dir/done.sha" || fail "the finished run's files changed"

# 6. Cheap checks before the vocabulary: nothing is trained or left for a run refused at once.
# (An unknown --preset is refused as the command line is read: bad_inputs.sh.)
for bad in "--device banana|device 'banana'" \
           "--heads 3|must be a positive multiple of heads 3" "--d-model 65536|the model would hold about"; do
  rm -rf "$dir/cheap"
  # shellcheck disable=SC2086
  run 1 "${bad#*|}" "$loom" train --data "$dir" --vocab 60 --out "$dir/cheap" ${bad%%|*}
  [[ ! -e "$dir/cheap/spm.model" ]] || fail "'${bad%%|*}' trained a vocabulary before it was refused"
done
# A leftover prepared corpus (a run that died before its first state) is reused only
# when it was prepared from the same files with the same arguments.
mkdir -p "$dir/vocab_same" "$dir/vocab_size"
cp -r "$dir"/done/corpus "$dir/vocab_same/"; cp -r "$dir"/done/corpus "$dir/vocab_size/"
run 0 "corpus: reusing '$dir/vocab_same/corpus' (prepared from this corpus with these arguments)" \
  "$loom" train "${common[@]}" --out "$dir/vocab_same" --max-steps 1
run 0 "corpus: '$dir/vocab_size/corpus' was prepared otherwise; preparing it again" \
  "$loom" train --data "$dir" --preset tiny --vocab 50 --max-tokens 64 --max-len 16 --out "$dir/vocab_size" --max-steps 1
grep -q '"pieces": 50' "$dir/vocab_size/corpus/manifest.json" || fail "the new store's manifest does not say 50 pieces"

# 1. SIGINT or SIGTERM at a random moment of a run: always a clean save and 130 / 143,
# never an abort (oneDNN's JIT gemm once took the signal frame onto the heap).
for ((i = 0; i < signals; i++)); do
  rm -rf "$dir/sig"
  # Emptied here, not only by the redirection below: that runs in the child, maybe after
  # wait_for_line has already found the previous try's step lines (a signal before StopScope).
  : > "$dir/sig.log"
  "$loom" train "${common[@]}" --out "$dir/sig" --max-steps 100000 --epochs 1000 --log-every 1 > "$dir/sig.log" 2>&1 &
  pid=$!
  wait_for_line '^step ' "$dir/sig.log"  # the first step, then a random 0 to 2 s more
  sleep "0.$((RANDOM % 10))$((RANDOM % 10))"; [[ $((RANDOM % 3)) -eq 0 ]] && sleep 1
  signal=$((i % 2 == 0 ? 2 : 15))
  kill -s $signal $pid; rc=0; wait $pid || rc=$?; pid=""
  [[ $rc -eq $((128 + signal)) ]] || { cat "$dir/sig.log"; fail "signal $signal, try $i: exit code $rc"; }
  grep -q "^interrupted after step [0-9]*: saved '$dir/sig/training_state.safetensors'" "$dir/sig.log" ||
    { cat "$dir/sig.log"; fail "signal $signal, try $i: no 'interrupted ... saved' line"; }
  ! grep -qE 'free\(\)|malloc\(\)|corrupted' "$dir/sig.log" || { cat "$dir/sig.log"; fail "heap corruption reported"; }
done
echo "$test_name: $signals signals at random moments, each a clean save; refusals, lock, temporaries and vocabulary checked"
