#!/usr/bin/env bash
# Decoding speed, loom vs PyTorch, same model, sentences and threads:
#   bench/decode.sh MODEL_DIR [INPUT] [THREADS]
#     MODEL_DIR  a folder from `loom train` (model.safetensors, spm.model)
#     INPUT      sentences to translate (default ../shared/data/multi30k/test_2016_flickr.de.gz)
#     THREADS    default 2
# Times (loading the model and tokenizing included; for torch, not its import):
#   loom translate --beam 4 at alpha 0.6 (the paper's) and 1.0 (a longer search: the main job
#   picks one by validation BLEU) (the issue's target: test_2016_flickr in <= 10 s on 2 cores),
#   loom translate --beam 1 --alpha 0 (greedy decoding), both again in --precision bf16 (with
#   how many translations agree with float32's), and bench/torch_decode.py,
#   PyTorch greedy decoding of the same weights with the same cached, batched algorithm,
#   alternated with loom's greedy decoding ROUNDS times (default 3).
# Prints the torch / loom greedy time ratio of the medians (> 1: loom faster) and how many
# greedy translations agree, a check that both ran the same model.
# Ends with bench/quiet.sh's check (exit code 3 when the machine was not quiet).
# Environment: LOOM (default build/tools/loom), TORCH_PYTHON (default /usr/bin/python3).
set -euo pipefail
cd "$(dirname "$0")/.."
model="${1:?usage: bench/decode.sh MODEL_DIR [INPUT] [THREADS]}"
input="${2:-../shared/data/multi30k/test_2016_flickr.de.gz}"
threads="${3:-2}"
loom="${LOOM:-build/tools/loom}"
torch_python="${TORCH_PYTHON:-/usr/bin/python3}"
[[ -x "$loom" ]] || { echo "bench/decode.sh: no loom binary at $loom: build first" >&2; exit 2; }
export OMP_NUM_THREADS="$threads"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
source bench/quiet.sh
quiet_start
echo "bench/decode.sh: $input, OMP_NUM_THREADS=$OMP_NUM_THREADS, load average: $(cut -d' ' -f1-3 /proc/loadavg)"

# Runs a command, prints "NAME: S s wall, U s cpu" and leaves the wall seconds in $seconds.
timed() {
  local name="$1"; shift
  local start=$EPOCHREALTIME
  /usr/bin/time -f "%U %S" -o "$out/cpu" "$@"
  seconds=$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { print b - a }')
  printf '%-34s %6.2f s wall, %6.2f s cpu\n' "$name:" "$seconds" "$(awk '{print $1 + $2}' "$out/cpu")"
}

timed "loom beam 4 (alpha 0.6)" "$loom" translate --model "$model" --input "$input" --output "$out/beam4.txt" --beam 4 \
  --alpha 0.6 --threads "$threads"
timed "loom beam 4, alpha 1.0" "$loom" translate --model "$model" --input "$input" --output "$out/beam4-alpha1.txt" \
  --beam 4 --alpha 1.0 --threads "$threads"
timed "loom greedy (--beam 1 --alpha 0)" "$loom" translate --model "$model" --input "$input" --output "$out/greedy.txt" \
  --beam 1 --alpha 0 --threads "$threads"
# bf16 decoding (the decoder's weights packed in bfloat16, ops/cpu/packed_matmul.h) where
# the CPU has AVX512-BF16 (otherwise translate says so and stays float32).
timed "loom beam 4, alpha 1.0, bf16" "$loom" translate --model "$model" --input "$input" \
  --output "$out/beam4-alpha1-bf16.txt" --beam 4 --alpha 1.0 --threads "$threads" --precision bf16
timed "loom greedy, bf16" "$loom" translate --model "$model" --input "$input" --output "$out/greedy-bf16.txt" \
  --beam 1 --alpha 0 --threads "$threads" --precision bf16
for run in beam4-alpha1 greedy; do
  echo "$run: bf16 translations identical to float32's: $(paste -d'\n' "$out/$run.txt" "$out/$run-bf16.txt" |
    paste - - | awk -F'\t' '$1 == $2 { same++ } END { print same "/" NR }')"
done
if "$torch_python" -c 'import torch, sentencepiece' 2>/dev/null; then
  # loom's greedy decoding and torch's alternated ROUNDS times (default 3), the ratio of
  # the medians: this kind of machine's speed can swing by a third within minutes.
  loom_times=() torch_times=()
  for ((round = 1; round <= ${ROUNDS:-3}; round++)); do
    timed "loom greedy, round $round" "$loom" translate --model "$model" --input "$input" \
      --output "$out/greedy.txt" --beam 1 --alpha 0 --threads "$threads"
    loom_times+=("$seconds")
    "$torch_python" bench/torch_decode.py --model "$model" --input "$input" --output "$out/torch.txt" \
      --threads "$threads" --json "$out/torch.json" > "$out/torch.log"
    torch_times+=("$("$torch_python" -c 'import json, sys; print(json.load(open(sys.argv[1]))["seconds"])' "$out/torch.json")")
    printf '%-34s %6.2f s wall (in the script: loading, tokenizing, decoding; no import)\n' "torch greedy, round $round:" \
      "${torch_times[-1]}"
  done
  median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'; }
  loom_median=$(median "${loom_times[@]}") torch_median=$(median "${torch_times[@]}")
  echo "torch / loom greedy time: $(awk -v t="$torch_median" -v l="$loom_median" 'BEGIN { printf "%.2f", t / l }')" \
    "(medians of ${#loom_times[@]}: torch $(printf '%.2f' "$torch_median") s, loom $(printf '%.2f' "$loom_median") s; > 1: loom faster)"
  echo "greedy translations identical: $(paste -d'\n' "$out/greedy.txt" "$out/torch.txt" | paste - - |
    awk -F'\t' '$1 == $2 { same++ } END { print same "/" NR }')"
else
  echo "bench/decode.sh: PyTorch or SentencePiece missing for $torch_python (scripts/setup --bench); loom only"
fi
quiet_end
