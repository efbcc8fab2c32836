#!/usr/bin/env bash
# Seeing a run: `loom train` writes metrics.jsonl (checked field by field, the
# per-layer gradient norms against the global one), `loom plot` draws two runs,
# `loom attention` draws a tiny model's attention (weights checked: rows sum to
# 1, the causal mask is zero above the diagonal); pictures checked by their bytes.
#   tests/cli_watch.sh <path to the loom binary>
set -euo pipefail
loom="$1"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
test_name=cli_watch
source "$(dirname "$0")/cli_lib.sh"
export LOOM_TEST_DIR="$dir"

make_corpus train 300
make_corpus val 20
"$loom" train --data "$dir" --out "$dir/run" --preset tiny --vocab 60 --max-steps 6 --log-every 2 \
  --warmup 10 --threads 2 > "$dir/train.log" 2>&1 || { cat "$dir/train.log"; fail "loom train failed"; }
grep -q "^step      2  epoch   1  loss" "$dir/train.log" || { cat "$dir/train.log"; fail "no plain progress lines"; }
if grep -q $'\r' "$dir/train.log"; then fail "a progress bar was drawn into a file (not a terminal)"; fi

# The metrics file: every field, steps 2, 4, 6, finite norms whose per-layer parts add up to the global norm.
python3 - "$dir/run/metrics.jsonl" "$dir/train.log" <<'PY' || fail "metrics.jsonl is wrong"
import json, math, re, sys
records = [json.loads(line) for line in open(sys.argv[1])]
assert records[0]["type"] == "run" and records[0]["preset"] == "tiny", records[0]
train = [r for r in records if r["type"] == "train"]
val = [r for r in records if r["type"] == "val"]
assert [r["step"] for r in train] == [2, 4, 6], [r["step"] for r in train]
assert val and val[-1]["step"] == 6, val
printed = [float(x) for x in re.findall(r"grad-norm (\S+)", open(sys.argv[2]).read())]
for r, shown in zip(train, printed):
    for key in ("epoch", "loss", "lr", "grad_norm", "layers", "tokens_per_s", "peak_tensor_bytes", "rss_bytes", "time_s"):
        assert key in r, (key, r)
    assert math.isfinite(r["grad_norm"]) and r["grad_norm"] > 0
    assert abs(r["grad_norm"] - shown) < 1e-3, (r["grad_norm"], shown)   # the line prints the same norm
    layers = r["layers"]
    assert {"encoder.layers.0", "encoder.layers.1", "decoder.layers.0", "decoder.layers.1", "src_embed"} <= set(layers), layers
    parts = math.sqrt(sum(l["grad_norm"] ** 2 for l in layers.values()))
    assert abs(parts - r["grad_norm"]) <= 1e-9 * r["grad_norm"], (parts, r["grad_norm"])
    assert all(0 < l["update_ratio"] < 1 for l in layers.values()), layers
    assert r["tokens_per_s"] > 0 and r["peak_tensor_bytes"] > 0 and r["rss_bytes"] > 0
for v in val:
    assert abs(math.exp(v["val_loss"]) - v["val_ppl"]) < 1e-6 * v["val_ppl"]
PY

# Two runs overlaid; the second ends in a line cut by a crash, which is skipped with a warning.
cp -r "$dir/run" "$dir/run2"
printf '{"type":"train","step":8,"lo' >> "$dir/run2/metrics.jsonl"
"$loom" plot "$dir/run" "$dir/run2" --out "$dir/curves.png" 2> "$dir/plot.err" > /dev/null || { cat "$dir/plot.err"; fail "plot failed"; }
grep -q "skipped 1 line(s) of '$dir/run2/metrics.jsonl'" "$dir/plot.err" || { cat "$dir/plot.err"; fail "no warning"; }
"$loom" plot "$dir/run" --out "$dir/curves.svg" > /dev/null
"$loom" plot "$dir/run" --layers --out "$dir/layers.svg" > /dev/null
grep -q "update / weight ratio per layer" "$dir/layers.svg" && grep -q ">encoder.layers.1<" "$dir/layers.svg" ||
  fail "plot --layers drew no per-layer panels"
if "$loom" plot "$dir/run" --out "$dir/curves.jpg" 2> "$dir/err.txt"; then fail "a .jpg was accepted"; fi
grep -q "must end in .png or .svg" "$dir/err.txt" || fail "no message for a .jpg"
if "$loom" plot "$dir/nowhere" --out "$dir/x.png" 2> "$dir/err.txt"; then fail "a missing run was accepted"; fi
grep -q "'$dir/nowhere' has no metrics.jsonl" "$dir/err.txt" || fail "no message for a missing run"

# Attention maps of the tiny model, all layers, and of its second layer alone.
"$loom" attention --model "$dir/run" --input "Hund Katze spielt" --out "$dir/att" --extra-len 4 > "$dir/att.log" ||
  fail "attention failed"
"$loom" attention --model "$dir/run" --input "Hund Katze spielt" --out "$dir/att2" --layer 2 --extra-len 4 > /dev/null ||
  fail "attention --layer 2 failed"
if "$loom" attention --model "$dir/run" --input "Hund" --layer 3 2> "$dir/err.txt"; then fail "--layer 3 of 2 accepted"; fi
grep -q "attention: --layer 3 but the model has 2 encoder and 2 decoder layers" "$dir/err.txt" || fail "no --layer message"

python3 - "$dir" <<'PY' || fail "pictures or attention weights are wrong"
import json, struct, sys
d = sys.argv[1]
def png_size(path):
    data = open(path, "rb").read(24)
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR", path
    return struct.unpack(">II", data[16:24])
assert png_size(f"{d}/curves.png") == (1200, 800)
svg = open(f"{d}/curves.svg").read()
assert svg.startswith("<?xml") and "<svg" in svg and "training loss" in svg
w = json.load(open(f"{d}/att-weights.json"))
S, T = len(w["source_pieces"]), len(w["target_pieces"])
assert w["source_pieces"][-1] == "</s>" and w["target_pieces"][0] == "<s>"
for kind, rows, cols in (("encoder", S, S), ("decoder", T, T), ("cross", T, S)):
    assert len(w[kind]) == 2, kind                      # every layer
    for layer in w[kind]:
        assert len(layer["heads"]) == 4                 # every head of the tiny preset
        for head in layer["heads"]:
            assert len(head) == rows * cols
            for r in range(rows):
                row = head[r * cols:(r + 1) * cols]
                assert abs(sum(row) - 1) < 1e-5, (kind, r, sum(row))
                if kind == "decoder":
                    assert all(x == 0 for x in row[r + 1:]), (kind, r, row)   # causal: nothing from the future
    for ext in ("png", "svg"):
        path = f"{d}/att-{kind}.{ext}"
        if ext == "png":
            png_size(path)
        else:
            text = open(path).read()
            assert text.startswith("<?xml") and "layer 2 head 4" in text, path
            assert ("&lt;/s>" in text) == (kind != "decoder") and ("&lt;s>" in text) == (kind != "encoder"), path
w2 = json.load(open(f"{d}/att2-weights.json"))
assert [l["layer"] for l in w2["encoder"]] == [2]

# In the pixels of the decoder's heat map (layer 2): the first query sees only itself (weight 1: the
# palette's darkest blue); the cell right of it is masked (weight 0: white, colder than any attended cell).
import zlib
def png_pixels(path):
    data = open(path, "rb").read()
    width, height = png_size(path)
    pos, idat = 8, b""
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        if kind == b"IHDR":
            assert data[pos + 16] == 8 and data[pos + 17] in (2, 6), "8-bit RGB(A) expected"
            channels = 3 if data[pos + 17] == 2 else 4
        if kind == b"IDAT":
            idat += data[pos + 8:pos + 8 + length]
        pos += 12 + length
    raw, stride, rows, prev = zlib.decompress(idat), width * channels, [], bytearray(width * channels)
    for y in range(height):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - channels] if i >= channels else 0
            b, c = prev[i], prev[i - channels] if i >= channels else 0
            p = a + b - c
            pred = [0, a, b, (a + b) // 2, a if abs(p - a) <= min(abs(p - b), abs(p - c)) else (b if abs(p - b) <= abs(p - c) else c)][f]
            line[i] = (line[i] + pred) & 255
        rows.append([tuple(line[x * channels:x * channels + 3]) for x in range(width)])
        prev = line
    return rows
weights = w2["decoder"][0]["heads"][0]
T = len(w2["target_pieces"])
assert T >= 2 and weights[0] == 1.0 and weights[1] == 0.0, (T, weights[:2])
px = png_pixels(f"{d}/att2-decoder.png")
darkest = (0x08, 0x30, 0x6b)
y0, x0 = next((y, row.index(darkest)) for y, row in enumerate(px) if darkest in row)   # cell (0, 0), top left
x1 = x0
while px[y0][x1 + 1] == darkest:
    x1 += 1
cell = x1 - x0 + 1
masked = px[y0 + cell // 2][x0 + cell + cell // 2]     # cell (0, 1): above the diagonal
attended = px[y0 + cell // 2][x0 + cell // 2]
assert masked == (255, 255, 255) and sum(attended) < sum(masked), (masked, attended, cell)
PY
echo "cli_watch: metrics, plot and attention maps all check out"
