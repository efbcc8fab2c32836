#!/usr/bin/env bash
# Hostile input through the real `loom` binary: every case must end with the
# exit code loom promises (1: an error while running, 2: a bad command line) and
# one line "loom: error: ..." naming what was wrong, and must cost no good file.
#   tests/bad_inputs.sh <path to the loom binary>
set -euo pipefail
loom="$1"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
test_name=bad_inputs
source "$(dirname "$0")/cli_lib.sh"
cases=0

# expect <exit code> <text stderr must contain> <command...>: for an error, stderr is that one line.
expect() {
  local want_rc=$1 want=$2 rc=0
  shift 2
  "$@" > "$dir/stdout.txt" 2> "$dir/stderr.txt" || rc=$?
  cases=$((cases + 1))
  [[ $rc -eq $want_rc ]] || { cat "$dir/stderr.txt"; fail "'${*:2}': exit code $rc, expected $want_rc"; }
  [[ -z $want ]] || grep -qF -- "$want" "$dir/stderr.txt" || { cat "$dir/stderr.txt"; fail "'${*:2}': stderr lacks: $want"; }
  if [[ $want_rc -ne 0 ]]; then  # one line, SentencePiece's own log lines included (there are none)
    [[ $(wc -l < "$dir/stderr.txt") -eq 1 && $(head -c 12 "$dir/stderr.txt") == "loom: error:" ]] ||
      { cat "$dir/stderr.txt"; fail "'${*:2}': the error is not one 'loom: error:' line"; }
  fi
}

# A safetensors file: 8-byte little-endian header length, the JSON header, then data.
#   safetensors <path> <json header> <data bytes>
safetensors() {
  local n=${#2} bytes=""
  for ((i = 0; i < 8; i++)); do bytes+=$(printf '\\x%02x' $(((n >> (8 * i)) & 255))); done
  { printf "$bytes"; printf '%s' "$2"; head -c "$3" /dev/zero; } > "$1"
}

# A model folder with the trained vocabulary and a checkpoint holding only `config` in its metadata.
#   model_with_config <folder> <config json, quotes escaped for a JSON string>
model_with_config() {
  mkdir -p "$1"
  cp "$dir/run/spm.model" "$1/"
  safetensors "$1/model.safetensors" "{\"__metadata__\":{\"vocabulary\":\"spm.model\",\"config\":\"$2\"}}" 0
}

make_corpus train 200
make_corpus val 10
"$loom" train --data "$dir" --out "$dir/run" --preset tiny --vocab 60 --max-steps 4 --warmup 10 > "$dir/train.log" 2>&1 ||
  { cat "$dir/train.log"; fail "the reference training run failed"; }
cp "$dir/run/model.safetensors" "$dir/good.safetensors"
unchanged() { cmp -s "$dir/run/model.safetensors" "$dir/good.safetensors" || fail "$1 changed the checkpoint"; }

# ---- the command line: exit code 2, the flag and its range named ----
expect 2 "no command given (the commands are gradcheck, explain, graph, bench, data, train, translate, bleu" "$loom"
expect 2 "unknown command 'trian'" "$loom" trian --data "$dir"
train=("$loom" train --data "$dir" --out "$dir/run" --preset tiny)
expect 2 "--log-every: must be at least 1, got 0" "${train[@]}" --log-every 0
expect 2 "--log-every: must be at least 1, got -1" "${train[@]}" --log-every -1
expect 2 "--epochs: must be at least 1, got 0" "${train[@]}" --epochs 0
expect 2 "--epochs: must be at least 1, got -1" "${train[@]}" --epochs -1
expect 2 "--threads: must be at least 1 and at most 1024, got 0" "${train[@]}" --threads 0
expect 2 "--threads: must be at least 1 and at most 1024, got -1" "${train[@]}" --threads -1
expect 2 "--collective-timeout: give minutes >= 0 (0: no limit), not '-1'" "${train[@]}" --collective-timeout=-1
expect 1 "LOOM_COLLECTIVE_TIMEOUT is 'soon', not a number of seconds >= 0" env LOOM_COLLECTIVE_TIMEOUT=soon "${train[@]}"
expect 2 "--dropout: must be at least 0 and below 1, got -0.5" "${train[@]}" --dropout -0.5
expect 2 "--dropout: must be at least 0 and below 1, got 1" "${train[@]}" --dropout 1
expect 2 "--max-len: must be at least 1 and at most 1048575, got 0" "${train[@]}" --max-len 0
expect 2 "--lr-factor: must be above 0 and at most 1000000, got 1e30" "${train[@]}" --lr-factor 1e30
expect 2 "--lr-factor: must be above 0 and at most 1000000, got 0" "${train[@]}" --lr-factor 0
expect 2 "--reduce: fastest not in {auto,off,exact,fast}" "${train[@]}" --reduce fastest
expect 2 "--preset: huge not in {tiny,small,base,big}" "${train[@]}" --preset huge
expect 2 "--bucket-mb: must be at least 1e-06 and at most 1000000, got 0" "${train[@]}" --bucket-mb 0
expect 2 "--label-smoothing: must be a number, at least 0 and below 1; got 'nan'" "${train[@]}" --label-smoothing nan
expect 2 "--vocab: must be a number, at least 5 and at most 16777216; got 'many'" "${train[@]}" --vocab many
expect 2 "--warmup: must be at least 1, got 0" "${train[@]}" --warmup 0
expect 2 "--preset: given 2 times; give it once" "${train[@]}" --preset small
expect 2 "--d-ff: must be at least 1 and at most 65536, got 1048576" "${train[@]}" --d-ff 1048576
expect 2 "--sample: must be at least 0 and at most 1000000, got -1" "$loom" explain softmax --sample -1
expect 2 "--seed: must be a whole number from 0 to 18446744073709551615, got '-1'" "${train[@]}" --seed -1
expect 2 "--seed: must be a whole number from 0 to 18446744073709551615, got '18446744073709551616'" \
  "${train[@]}" --seed 18446744073709551616
translate=("$loom" translate --model "$dir/run" --input "$dir/val.de")
expect 2 "--alpha: must be a number, at least 0 and at most 10; got 'nan'" "${translate[@]}" --alpha nan
expect 2 "--beam: must be at least 1 and at most 1000, got 5000" "${translate[@]}" --beam 5000
expect 2 "--batch: must be at least 1 and at most 10000, got 0" "${translate[@]}" --batch 0
expect 2 "--extra-len: must be at least 0 and at most 1048576, got -1" "${translate[@]}" --extra-len -1
expect 2 "--threads: must be at least 1 and at most 1024, got 0" "$loom" bench step --threads 0
# --device: a name that is no device, and a GPU this machine lacks (no CUDA build, no GPU, or
# fewer than 100 GPUs: each says so in one line), before any work or file is touched.
expect 1 "device 'gpu': expected cpu, cuda, cuda:N or standin" "${train[@]}" --device gpu
for run in "${train[*]}" "${translate[*]}" "$loom bench step"; do
  # shellcheck disable=SC2086
  expect 1 "device 'cuda:99': " $run --device cuda:99
  # bf16 on CUDA is cuBLAS's mode: refused here for want of a GPU, not for the precision.
  # shellcheck disable=SC2086
  [[ -e /dev/nvidia0 ]] || expect 1 "device 'cuda': " $run --device cuda --precision bf16
done
[[ -e /dev/nvidia0 ]] || expect 1 "device 'cuda': " "$loom" gradcheck add --device cuda
unchanged "--device"
expect 2 "gradcheck: no op named 'nosuchop' (see \`loom gradcheck --list\`)" "$loom" gradcheck nosuchop
# loom graph --expr: hostile nesting and sizes are named errors, not a stack overflow or hours of work.
expect 1 "--expr: nested deeper than 200 levels" "$loom" graph --expr "$(printf '(%.0s' {1..25000})x$(printf ')%.0s' {1..25000})" --out "$dir/g"
expect 1 "--expr: nested deeper than 200 levels" "$loom" graph --expr "$(printf -- '-%.0s' {1..120000})x" --out "$dir/g"
expect 1 "--expr: nested deeper than 200 levels" "$loom" graph --expr "$(printf 'tanh(%.0s' {1..20000})x$(printf ')%.0s' {1..20000})" --out "$dir/g"
expect 1 "--expr: more than 1000 operations" "$loom" graph --expr "x$(printf '+x%.0s' {1..3000})" --out "$dir/g"
expect 1 "graph: too wide to lay out: its edges span 4950 ranks beyond their neighbours" \
  "$loom" graph --expr "x$(printf '+x%.0s' {1..100})" --out "$dir/g"
expect 1 "--shape z=...: the expression \"x+y\" has no variable 'z'" "$loom" graph --expr "x+y" --shape z=2 --out "$dir/g"
expect 1 "bench ops: no case matches --filter 'nosuchcase' (\`loom bench ops --list\` lists them)" \
  "$loom" bench ops --filter nosuchcase
unchanged "a refused command line"

# ---- train: files and folders ----
touch "$dir/a_file"
expect 1 "train: --out '$dir/a_file' exists and is not a folder" "$loom" train --data "$dir" --out "$dir/a_file"
expect 1 "train: cannot create the --out folder '/proc/loom-run'" "$loom" train --data "$dir" --out /proc/loom-run
long_name=$(printf 'a%.0s' {1..300})  # a std::filesystem_error (ENAMETOOLONG), caught like every exception
expect 1 "loom: error: File name too long: '$long_name/manifest.json'" "$loom" train --data "$long_name" --out "$dir/x"
expect 1 "train: --max-tokens 64 must exceed --max-len 64" "${train[@]}" --max-tokens 64 --max-len 64
mkdir -p "$dir/empty_val" "$dir/blank" "$dir/cr"
cp "$dir"/train.* "$dir/empty_val/"; : > "$dir/empty_val/val.de"; : > "$dir/empty_val/val.en"
expect 1 "data prepare: the val split '$dir/empty_val/val.de' is empty" "$loom" train --data "$dir/empty_val" --out "$dir/empty_val/run"
printf '  \n\t\n\n' > "$dir/blank/train.de"; printf 'a\nb\nc\n' > "$dir/blank/train.en"; cp "$dir"/val.* "$dir/blank/"
expect 1 "data prepare: the train split '$dir/blank/train.de' has 3 lines, all blank" "$loom" train --data "$dir/blank" --out "$dir/blank/run"
printf '\r\r\r' > "$dir/cr/train.de"; printf '\r\r\r' > "$dir/cr/train.en"; cp "$dir"/val.* "$dir/cr/"
expect 1 "data prepare: the train split '$dir/cr/train.de' has 1 lines, all blank" "$loom" train --data "$dir/cr" --out "$dir/cr/run"
expect 1 "train: --max-len 1 drops all 200 pairs of the train split (store '$dir/len1/corpus')" \
  "$loom" train --data "$dir" --out "$dir/len1" --preset tiny --vocab 60 --max-len 1
unchanged "a split filtered to nothing"
expect 0 "" "$loom" train --data "$dir" --out "$dir/len16" --preset tiny --vocab 60 --max-len 16 --max-steps 1
grep -q "^train: dropped [0-9]* of 200 pairs longer than --max-len 16 pieces" "$dir/stdout.txt" ||
  { cat "$dir/stdout.txt"; fail "the pairs dropped by --max-len are not counted"; }

# A full disk (a file size limit here) while writing: an error naming the file; no
# half-written file under the real name, no temporary left; the next run is whole.
mkdir -p "$dir/full"
expect 1 "cannot write '$dir/full/corpus.tmp." bash -c "trap '' XFSZ; ulimit -f 1; exec \"\$@\"" _ \
  "$loom" train --data "$dir" --out "$dir/full" --preset tiny --vocab 60 --max-steps 1
[[ -z $(ls "$dir/full") ]] || fail "a failed vocabulary write left files: $(ls "$dir/full")"
# Room for the prepared corpus's largest file, not the checkpoint.
corpus_kib=$(($(find "$dir/run/corpus" -type f -printf '%s\n' | sort -n | tail -1) / 1024 + 4))
expect 1 "cannot write '$dir/full/model.safetensors'" bash -c "trap '' XFSZ; ulimit -f $corpus_kib; exec \"\$@\"" _ \
  "$loom" train --data "$dir" --out "$dir/full" --preset tiny --vocab 60 --max-steps 1
# metrics.jsonl holds whole lines only (the run's own record of what it did before the write failed).
[[ $(ls "$dir/full") == $'corpus\nmetrics.jsonl\nspm.model\nspm.vocab' ]] ||
  fail "a failed checkpoint write left: $(ls "$dir/full")"
expect 0 "" "$loom" train --data "$dir" --out "$dir/full" --preset tiny --vocab 60 --max-steps 1

# ---- checkpoints and model configurations ----
mkdir -p "$dir/folder/model.safetensors"
expect 1 "load_safetensors: '$dir/folder/model.safetensors' is a folder, not a checkpoint file" \
  "$loom" translate --model "$dir/folder" --input "$dir/val.de"
mkdir -p "$dir/overflow"
safetensors "$dir/overflow/model.safetensors" '{"w":{"dtype":"F32","shape":[4611686018427387905,4],"data_offsets":[0,16]}}' 16
expect 1 "tensor 'w': shape [4611686018427387905,4] of float32 has more bytes than a 64-bit count holds" \
  "$loom" translate --model "$dir/overflow" --input "$dir/val.de"
config() {  # the tiny model's configuration with one field changed: config <field> <value>
  local c='{\"src_vocab\":60,\"tgt_vocab\":60,\"d_model\":64,\"d_ff\":256,\"heads\":4,\"encoder_layers\":2,'
  c+='\"decoder_layers\":2,\"dropout\":0.1,\"max_len\":1024,\"pad_id\":0,\"share_embeddings\":true,'
  c+='\"pre_norm\":false,\"layer_norm_eps\":1e-06}'
  sed -E "s/(\\\\\"$1\\\\\":)[^,}]*/\\1$2/" <<< "$c"
}
for bad in "max_len 4611686018427387904|max_len must be between 1 and 1048576, got 4611686018427387904" \
           "encoder_layers 100000|encoder_layers must be between 1 and 1000, got 100000" \
           "layer_norm_eps 0|layer_norm_eps must be above 0 and at most 1, got 0" \
           "heads 0|heads must be between 1 and 64, got 0" \
           "d_model 65536|the model would hold about" \
           "dropout -1|dropout must be at least 0 and below 1, got -1" \
           "src_vocab -5|src_vocab must be between 1 and 16777216, got -5"; do
  model_with_config "$dir/config" "$(config ${bad%%|*})"
  expect 1 "TransformerConfig: ${bad#*|}" "$loom" translate --model "$dir/config" --input "$dir/val.de"
done

expect 1 "attention: --input is not valid UTF-8 text" "$loom" attention --model "$dir/run" --input $'\xff\xfe\x80' --out "$dir/attn"
[[ -z $(ls "$dir" | grep '^attn') ]] || fail "a refused attention left pictures: $(ls "$dir" | grep '^attn')"
# The vocabulary a checkpoint names: empty, or a path leaving the model folder, is refused by name.
for vocabulary in "" "../../x/spm.model" "/etc/passwd"; do
  mkdir -p "$dir/vocabulary"
  safetensors "$dir/vocabulary/model.safetensors" "{\"__metadata__\":{\"vocabulary\":\"$vocabulary\",\"config\":\"$(config d_model 64)\"}}" 0
  expect 1 "translate: '$dir/vocabulary/model.safetensors' names the vocabulary '$vocabulary', not a file inside the model folder" \
    "$loom" translate --model "$dir/vocabulary" --input "$dir/val.de"
done

# ---- translate: a line too long for the model is cut with a warning, the rest translated ----
# The checkpoint's positional table shortened to 32 (same byte count: the header length holds).
mkdir -p "$dir/short"; cp "$dir/run/spm.model" "$dir/short/"
LC_ALL=C sed 's/\\"max_len\\":1024/\\"max_len\\":32  /' "$dir/run/model.safetensors" > "$dir/short/model.safetensors"
{ head -3 "$dir/val.de"; printf 'Hund Katze %.0s' {1..200}; echo; head -3 "$dir/val.de"; } > "$dir/long.de"
expect 0 "loom: warning: translate: line 4 of '$dir/long.de' has" \
  "$loom" translate --model "$dir/short" --input "$dir/long.de" --output "$dir/long.hyp" --beam 2 --extra-len 100000
grep -q "more than the model's 31; translating its first 31" "$dir/stderr.txt" || fail "no truncation warning"
[[ $(wc -l < "$dir/long.hyp") -eq 7 ]] || fail "expected 7 translations, got $(wc -l < "$dir/long.hyp")"
expect 1 "cannot write '$dir/folder/model.safetensors': it is a folder" \
  "$loom" translate --model "$dir/run" --input "$dir/val.de" --output "$dir/folder/model.safetensors"
expect 1 "cannot open '$dir/nowhere.de'" "$loom" translate --model "$dir/run" --input "$dir/nowhere.de"
# Text that is not UTF-8 is named by file and line, by every command that reads text.
expect 1 "stdin: line 1 is not UTF-8 text (byte 1 of the line is 0xff)" \
  sh -c "printf '\\377\\376\\200\\n' | '$loom' translate --model '$dir/run'"
printf 'ein Hund\n\303\050 zwei\n' > "$dir/bytes.de.gz"  # not gzip: zlib reads it as it is
expect 1 "'$dir/bytes.de.gz': line 2 is not UTF-8 text (byte 1 of the line is 0xc3)" \
  "$loom" translate --model "$dir/run" --input "$dir/bytes.de.gz"
expect 1 "'$dir/bytes.de.gz': line 2 is not UTF-8 text" "$loom" bleu "$dir/bytes.de.gz" "$dir/val.en"
# A study's corpus of blank files: the file is named.
mkdir -p "$dir/blank" && for f in train.de train.en val.de val.en; do printf '\n \n' > "$dir/blank/$f"; done
expect 1 "study: the train split '$dir/blank/train.de' has 2 lines, all blank" \
  "$loom" study label-smoothing --data "$dir/blank" --out "$dir/blank-study"
# `loom average`: one checkpoint is a bad command line; checkpoints of different
# models are an error naming the file and the field, and write nothing.
expect 2 "" "$loom" average --out "$dir/avgbad" "$dir/run/model.safetensors"
expect 1 "average: '$dir/short/model.safetensors' has another 'config' than '$dir/run/model.safetensors': field 'max_len' is 32 here but 1024" \
  "$loom" average --out "$dir/avgbad" "$dir/run" "$dir/short"
[[ ! -e "$dir/avgbad" ]] || fail "a failed average left its --out folder: $(ls -A "$dir/avgbad")"
# A checkpoint holding NaN (a diverged run's) is refused by name, not averaged into the others.
header='{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}'
safetensors "$dir/finite.safetensors" "$header" 8
safetensors "$dir/nan.safetensors" "$header" 4; printf '\x00\x00\xc0\x7f' >> "$dir/nan.safetensors"  # w = [0, NaN]
expect 1 "average: '$dir/nan.safetensors': tensor 'w' holds nan at element 1 (a diverged run?); not averaged" \
  "$loom" average --out "$dir/avgnan" "$dir/finite.safetensors" "$dir/nan.safetensors"
[[ ! -e "$dir/avgnan" ]] || fail "a refused average left its --out folder"
# An average never replaces a run's model: --out may be new or an earlier average.
expect 1 "average: --out '$dir/run' holds a training run; give a new folder" \
  "$loom" average --out "$dir/run" "$dir/run/model.safetensors" "$dir/good.safetensors"
# A damaged model: a flipped data byte is named by its tensor's checksum (--skip-checksums loads
# it anyway); a weight set to NaN with a valid checksum is named before decoding; a FIFO is
# refused instead of blocking.
damaged() {  # damaged <folder> <nan|flip>: a copy of run/ with its first tensor's first float changed
  rm -rf "$1"; cp -r "$dir/run" "$1"
  python3 - "$1/model.safetensors" "$2" <<'PY'
import json, struct, sys, zlib
path, how = sys.argv[1], sys.argv[2]
data = bytearray(open(path, "rb").read())
n = struct.unpack("<Q", data[:8])[0]
header = json.loads(data[8:8 + n])
name = min((k for k in header if k != "__metadata__"), key=lambda k: header[k]["data_offsets"][0])
begin, end = (8 + n + o for o in header[name]["data_offsets"])
if how == "nan":
    data[begin:begin + 4] = struct.pack("<f", float("nan"))
    sums = json.loads(header["__metadata__"]["loom.crc32"])
    sums[name] = "%08x" % zlib.crc32(bytes(data[begin:end]))
    header["__metadata__"]["loom.crc32"] = json.dumps(sums, separators=(",", ":"))
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (n - len(text))
    assert len(text) == n, "the header grew"
    data[8:8 + n] = text
else:
    data[begin] ^= 1
open(path, "wb").write(data)
print(name)
PY
}
flipped=$(damaged "$dir/flipped" flip)
expect 1 "load_safetensors '$dir/flipped/model.safetensors': tensor '$flipped' does not match its checksum" \
  "$loom" translate --model "$dir/flipped" --input "$dir/val.de"
expect 0 "" "$loom" translate --model "$dir/flipped" --input "$dir/val.de" --skip-checksums --beam 1
poisoned=$(damaged "$dir/poisoned" nan)
expect 1 "translate: '$dir/poisoned/model.safetensors': tensor '$poisoned' holds NaN or Inf, so the model cannot decode" \
  "$loom" translate --model "$dir/poisoned" --input "$dir/val.de"
mkdir -p "$dir/fifo" && cp "$dir/run/spm.model" "$dir/fifo/" && mkfifo "$dir/fifo/model.safetensors"
expect 1 "load_safetensors: '$dir/fifo/model.safetensors' is not a regular file" \
  timeout 30 "$loom" translate --model "$dir/fifo" --input "$dir/val.de"
unchanged "the bad checkpoints and translations"
# ---- corpus stores (loom/models/corpus_store.h) ----
prepare=("$loom" data prepare --data "$dir" --vocab 60)
expect 0 "" "${prepare[@]}" --out "$dir/store" --threads 2
grep -q "^store: 200 pairs, " "$dir/stdout.txt" || { cat "$dir/stdout.txt"; fail "prepare does not report its pairs"; }
# The same store at any thread count, and from a vocabulary sample drawn the same way.
expect 0 "" "${prepare[@]}" --out "$dir/store1" --threads 1
cmp -s "$dir/store/train.tokens" "$dir/store1/train.tokens" && cmp -s "$dir/store/spm.model" "$dir/store1/spm.model" ||
  fail "a store prepared on 1 thread differs from one prepared on 2"
expect 0 "" "$loom" data prepare --data "$dir" --vocab 40 --out "$dir/sampled" --vocab-sample 100 --threads 2
grep -q "trained on 100 sentences (50 of 200 pairs)" "$dir/stdout.txt" || { cat "$dir/stdout.txt"; fail "no sample"; }
expect 0 "" "$loom" data prepare --data "$dir" --vocab 40 --out "$dir/sampled1" --vocab-sample 100 --threads 1
cmp -s "$dir/sampled/spm.model" "$dir/sampled1/spm.model" || fail "the vocabulary sample depends on the thread count"
expect 1 "data prepare: '$dir/store' exists; prepare into a new folder" "${prepare[@]}" --out "$dir/store"
# Cleaning: the duplicates dropped leave the pairs of the corpus without them (same ids, same fingerprint).
unique=$(paste "$dir/train.de" "$dir/train.en" | sort -u | wc -l)
mkdir -p "$dir/dups" "$dir/uniq"
paste "$dir/train.de" "$dir/train.en" | awk -F'\t' '!seen[$0]++ { print $1 > "'"$dir"'/uniq/train.de"; print $2 > "'"$dir"'/uniq/train.en" }'
cp "$dir"/train.* "$dir/dups/"
expect 0 "" "$loom" data prepare --data "$dir/dups" --out "$dir/dups/store" --vocabulary "$dir/store/spm.model" --drop-duplicates
grep -q "cleaning: dropped $((200 - unique)) of 200 pairs (0 with a side over --max-pieces, 0 over --max-ratio, 0 with an empty side, $((200 - unique)) duplicates)" \
  "$dir/stdout.txt" || { cat "$dir/stdout.txt"; fail "the duplicates dropped are not counted"; }
expect 0 "" "$loom" data prepare --data "$dir/uniq" --out "$dir/uniq/store" --vocabulary "$dir/store/spm.model"
[[ $(grep '"fingerprint"' "$dir/dups/store/manifest.json") == $(grep '"fingerprint"' "$dir/uniq/store/manifest.json") ]] ||
  fail "a store cleaned of duplicates differs from one prepared without them"
# Corpora prepare refuses, naming the file; no store and no temporary is left.
mkdir -p "$dir/bad"
printf 'a\nb\nc\n' > "$dir/bad/train.de"; printf 'a\nb\n' > "$dir/bad/train.en"
expect 1 "data prepare: '$dir/bad/train.de' has 3 lines but '$dir/bad/train.en' has 2: the sides are not aligned" \
  "$loom" data prepare --data "$dir/bad" --out "$dir/bad/store" --vocabulary "$dir/store/spm.model"
: > "$dir/bad/train.de"; : > "$dir/bad/train.en"
expect 1 "data prepare: the train split '$dir/bad/train.de' is empty" "$loom" data prepare --data "$dir/bad" --out "$dir/bad/store"
awk 'BEGIN { for (i = 0; i < 70000; i++) printf "Hund "; print "" }' > "$dir/bad/train.de"; echo dog > "$dir/bad/train.en"
expect 1 "data prepare: line 1 of '$dir/bad/train.de' is 210000 pieces, more than the 65535 a store holds per side: drop such pairs with --max-pieces N" \
  "$loom" data prepare --data "$dir/bad" --out "$dir/bad/store" --vocabulary "$dir/store/spm.model"
[[ $(ls "$dir/bad") == $'train.de\ntrain.en' ]] || fail "a refused prepare left: $(ls "$dir/bad")"
# A store damaged after it was written is refused when opened, before any training.
broken() { rm -rf "$dir/broken"; cp -r "$dir/store" "$dir/broken"; }
train_on=("$loom" train --data "$dir/broken" --preset tiny --max-steps 1)
broken; sed -i 's/"version": 1/"version": 99/' "$dir/broken/manifest.json"
expect 1 "'$dir/broken/manifest.json' is a corpus store of version 99; this loom reads version 1: prepare it again" \
  "${train_on[@]}" --out "$dir/broken_run"
broken; rm "$dir/broken/train.tokens"
expect 1 "corpus store '$dir/broken': '$dir/broken/train.tokens' is missing (prepare the store again)" "${train_on[@]}" --out "$dir/broken_run"
broken; truncate -s -2 "$dir/broken/train.tokens"
expect 1 "corpus store '$dir/broken': '$dir/broken/train.tokens' is $(($(stat -c %s "$dir/store/train.tokens") - 2)) bytes, its manifest says $(stat -c %s "$dir/store/train.tokens") (truncated)" \
  "${train_on[@]}" --out "$dir/broken_run"
broken; printf '\x07' | dd of="$dir/broken/train.lengths" bs=1 seek=0 conv=notrunc status=none
expect 1 "corpus store '$dir/broken': 'train.lengths' does not match its manifest" "${train_on[@]}" --out "$dir/broken_run"
broken; printf '{"format": "loom-corpus-store", "version": 1}' > "$dir/broken/manifest.json"
expect 1 "cannot read the corpus store's manifest '$dir/broken/manifest.json'" "${train_on[@]}" --out "$dir/broken_run"
expect 2 "--max-pieces: Value 70000 not in range" "${prepare[@]}" --out "$dir/x" --max-pieces 70000
expect 1 "train: --vocab 50 differs from the store '$dir/store', prepared with --vocab 60" \
  "$loom" train --data "$dir/store" --vocab 50 --out "$dir/vocab_run"
[[ ! -e "$dir/broken_run/spm.model" && ! -e "$dir/vocab_run/spm.model" ]] || fail "a refused store's run began"
echo "bad_inputs: $cases cases, each with the exit code and message expected"
