#!/usr/bin/env bash
# The translation commands end to end on a made-up corpus: `loom train` writes a
# vocabulary and a checkpoint, `loom translate` reads them and writes one line per
# input line, `loom average` averages checkpoints into a folder translate reads,
# `loom bleu` scores the output; bad input fails with a clear message.
#   tests/cli_translate.sh <path to the loom binary>
set -euo pipefail
loom="$1"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
test_name=cli_translate
source "$(dirname "$0")/cli_lib.sh"

make_corpus train 400
make_corpus val 20
gzip "$dir/train.de"  # one side compressed: both forms are read

"$loom" train --data "$dir" --out "$dir/run" --preset tiny --vocab 60 --max-steps 12 --log-every 4 \
  --warmup 10 --threads 2 > "$dir/train.log" 2>&1 || { cat "$dir/train.log"; fail "loom train failed"; }
grep -q "step      4  epoch   [0-9]  loss" "$dir/train.log" || { cat "$dir/train.log"; fail "no progress lines"; }
grep -q "saved $dir/run/model.safetensors" "$dir/train.log" || fail "no checkpoint line"
[[ -s "$dir/run/spm.model" && -s "$dir/run/model.safetensors" ]] || fail "spm.model or model.safetensors missing"

"$loom" translate --model "$dir/run" --input "$dir/val.de" --output "$dir/val.hyp" --beam 2 --extra-len 4
[[ $(wc -l < "$dir/val.hyp") -eq 20 ]] || fail "expected 20 translations, got $(wc -l < "$dir/val.hyp")"
# A line's translation does not depend on the lines batched with it.
"$loom" translate --model "$dir/run" --input "$dir/val.de" --output "$dir/one_by_one.hyp" --beam 2 --extra-len 4 --batch 1
cmp -s "$dir/val.hyp" "$dir/one_by_one.hyp" || fail "translations change with --batch"
# Nor on the thread count: each thread decodes whole batches with single-threaded
# kernels, profiled or not.
for run in "--threads 1" "--threads 3 --batch 3" "--threads 2 --batch 4 --profile"; do
  # shellcheck disable=SC2086
  "$loom" translate --model "$dir/run" --input "$dir/val.de" --output "$dir/threads.hyp" --beam 2 --extra-len 4 $run \
    2> "$dir/threads.err" || { cat "$dir/threads.err"; fail "translate $run failed"; }
  cmp -s "$dir/val.hyp" "$dir/threads.hyp" || fail "translations change with $run"
done
grep -q "^kernel profile, per decoding" "$dir/threads.err" || { cat "$dir/threads.err"; fail "--profile printed no table"; }
grep -q "^decoding: [0-9.]* s on 2 thread(s) decoding batches at once" "$dir/threads.err" ||
  { cat "$dir/threads.err"; fail "--profile did not decode on 2 threads"; }
head -2 "$dir/val.de" | "$loom" translate --model "$dir/run" --beam 1 --extra-len 4 > "$dir/stdin.hyp"
[[ $(wc -l < "$dir/stdin.hyp") -eq 2 ]] || fail "stdin: expected 2 translations"
# --output that is a symbolic link: written through, the link stays a link.
ln -s "$dir/linked_target.hyp" "$dir/link.hyp"
head -2 "$dir/val.de" | "$loom" translate --model "$dir/run" --beam 1 --extra-len 4 --output "$dir/link.hyp"
[[ -L "$dir/link.hyp" && $(wc -l < "$dir/linked_target.hyp") -eq 2 ]] || fail "--output through a link: not written through"
# A blank line stays blank (not decoded into words); the others translate as before.
{ head -2 "$dir/val.de"; echo; echo "   "; sed -n 3,4p "$dir/val.de"; } > "$dir/blanks.de"
"$loom" translate --model "$dir/run" --input "$dir/blanks.de" --output "$dir/blanks.hyp" --beam 2 --extra-len 4
[[ $(sed -n 3p "$dir/blanks.hyp") == "" && $(sed -n 4p "$dir/blanks.hyp") == "" ]] ||
  { cat -A "$dir/blanks.hyp"; fail "blank lines were translated into words"; }
diff <(sed -n '1,2p;5,6p' "$dir/blanks.hyp") <(head -4 "$dir/val.hyp") > /dev/null ||
  fail "the lines around the blank ones translated differently"

# --nbest: LINE, RANK, SCORE, LOGPROB, TEXT per hypothesis, best score first; rank 1 is the plain output.
"$loom" translate --model "$dir/run" --input "$dir/val.de" --beam 2 --nbest 2 --extra-len 4 > "$dir/nbest.txt"
awk -F'\t' 'NF != 5 || $1 < 1 || $1 > 20 || ($2 != 1 && $2 != 2) || $3 > 0 || $4 > 0 { bad = 1 }
  $2 == 2 && !($1 == line && $3 <= score) { bad = 1 }
  { line = $1; score = $3 } END { exit bad }' "$dir/nbest.txt" || { cat "$dir/nbest.txt"; fail "--nbest lines malformed or out of order"; }
awk -F'\t' '$2 == 1 { print $5 }' "$dir/nbest.txt" | cmp -s - "$dir/val.hyp" || fail "--nbest's first hypotheses differ from the translations"
if "$loom" translate --model "$dir/run" --input "$dir/val.de" --beam 2 --nbest 3 2> "$dir/err.txt" > /dev/null; then
  fail "--nbest above --beam accepted"; fi
grep -q "translate: --nbest 3 asks for more hypotheses than --beam 2 keeps" "$dir/err.txt" || { cat "$dir/err.txt"; fail "unclear --nbest error"; }
# Beam 1 at alpha 0, text only, decodes greedily (models::best_tokens): the search's
# text (--nbest 1), max_len's forced eos included.
"$loom" translate --model "$dir/run" --input "$dir/val.de" --beam 1 --alpha 0 --extra-len 2 > "$dir/greedy.hyp"
"$loom" translate --model "$dir/run" --input "$dir/val.de" --beam 1 --alpha 0 --extra-len 2 --nbest 1 | cut -f5 |
  cmp -s - "$dir/greedy.hyp" || fail "beam 1's greedy decoding differs from the search's text"

# `loom average` writes a model folder translate reads; averaging a checkpoint with
# itself (given as a run folder and as a file) gives its bits, so the same translations.
"$loom" average --out "$dir/avg" "$dir/run" "$dir/run/model.safetensors" > "$dir/average.log" ||
  { cat "$dir/average.log"; fail "loom average failed"; }
grep -q "averaged 2 checkpoints -> $dir/avg/model.safetensors" "$dir/average.log" || fail "no average line"
cmp -s "$dir/run/spm.model" "$dir/avg/spm.model" || fail "average did not copy the vocabulary"
"$loom" translate --model "$dir/avg" --input "$dir/val.de" --output "$dir/avg.hyp" --beam 2 --extra-len 4
cmp -s "$dir/val.hyp" "$dir/avg.hyp" || fail "the self-average translates differently from its checkpoint"

# --model twice: an ensemble (the mean of the models' log-probabilities); a model with
# its own bits translates as it does alone. Another vocabulary is refused, named.
"$loom" translate --model "$dir/run" --model "$dir/avg" --input "$dir/val.de" --output "$dir/ensemble.hyp" --beam 2 \
  --extra-len 4
cmp -s "$dir/val.hyp" "$dir/ensemble.hyp" || fail "a model ensembled with its own bits translates differently"
"$loom" train --data "$dir" --out "$dir/vocab50" --preset tiny --vocab 50 --max-steps 1 --threads 2 > /dev/null 2>&1 ||
  fail "training the 50-piece model failed"
if "$loom" translate --model "$dir/run" --model "$dir/vocab50" --input "$dir/val.de" > /dev/null 2> "$dir/err.txt"; then
  fail "an ensemble of two vocabularies accepted"; fi
grep -qF "translate: an ensemble's models must share one vocabulary; '$dir/run/spm.model' and '$dir/vocab50/spm.model' differ" \
  "$dir/err.txt" || { cat "$dir/err.txt"; fail "unclear error for an ensemble of two vocabularies"; }

"$loom" bleu "$dir/val.en" "$dir/val.en" | grep -q "^BLEU = 100.00 100.0/100.0/100.0/100.0" || fail "BLEU of the references against themselves is not 100"
"$loom" bleu "$dir/val.hyp" "$dir/val.en" | grep -q "^BLEU = " || fail "no BLEU line"

if "$loom" train --data "$dir/nowhere" --out "$dir/run2" 2> "$dir/err.txt"; then fail "training on a missing folder succeeded"; fi
grep -q "loom: error: train: no corpus file '$dir/nowhere/train.de' or '$dir/nowhere/train.de.gz'" "$dir/err.txt" ||
  { cat "$dir/err.txt"; fail "unclear error for a missing corpus"; }
echo "cli_translate: train, translate, average, bleu and a missing-corpus error all behave"
