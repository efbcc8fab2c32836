#!/usr/bin/env bash
# `loom study NAME`: each study's picture and table, the table's numbers checked
# against what the mathematics says they must be.
#   tests/cli_study.sh <path to the loom binary>
set -euo pipefail
loom="$1"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
test_name=cli_study
source "$(dirname "$0")/cli_lib.sh"

for study in scaling positions noam masks; do
  "$loom" study "$study" --out "$dir" > "$dir/$study.log" || { cat "$dir/$study.log"; fail "study $study failed"; }
  grep -q "^table: $dir/$study.csv" "$dir/$study.log" || fail "study $study printed no table line"
done
# The studies that train: tiny runs on a made-up corpus (a few steps: this checks the machinery, not the paper).
make_corpus train 120
make_corpus val 12
for study in label-smoothing norm-warmup; do
  "$loom" study "$study" --data "$dir" --out "$dir" --steps 2 --sentences 100 --vocab 50 > "$dir/$study.log" 2>&1 ||
    { cat "$dir/$study.log"; fail "study $study failed"; }
done
if "$loom" study norm-warmup --out "$dir" 2> "$dir/err.txt"; then fail "norm-warmup ran without --data"; fi
grep -q "study norm-warmup: --data is required" "$dir/err.txt" || fail "no message for a missing --data"
if "$loom" study nonsense --out "$dir" 2> "$dir/err.txt"; then fail "an unknown study ran"; fi
grep -q "study: no study named 'nonsense' (the studies are " "$dir/err.txt" || fail "no message for an unknown study"

python3 - "$dir" <<'PY' || fail "a study's table is wrong"
import csv, math, sys
d = sys.argv[1]
def table(name):
    return [{k: float(v) for k, v in row.items()} for row in csv.DictReader(open(f"{d}/{name}.csv"))]
for name in ("scaling", "positions", "noam", "masks", "label-smoothing", "norm-warmup"):
    assert open(f"{d}/{name}.png", "rb").read(8) == b"\x89PNG\r\n\x1a\n", name
    assert open(f"{d}/{name}.svg").read(200).startswith("<?xml"), name
# scaling: Var(q.k) = d_k within 4 standard errors; scaled, 1; saturation and vanishing gradients without the scale.
rows = table("scaling")
for r in rows:
    assert abs(r["var_unscaled"] - r["d_k"]) < 4 * r["var_unscaled_stderr"], r
    assert abs(r["var_scaled"] - 1) < 4 * r["var_unscaled_stderr"] / r["d_k"], r
big = rows[-1]
assert big["max_weight_unscaled"] > 0.9 and big["max_weight_scaled"] < 0.3, big
assert big["grad_norm_unscaled"] < big["grad_norm_scaled"] / 3, big
# positions: PE(p).PE(p+k) is the same for every p and equals sum_i cos(w_i k); d_model / 2 at k = 0.
rows = table("positions")
assert abs(rows[0]["mean_dot"] - 64) < 1e-3
for r in rows:
    assert r["max_dot"] - r["min_dot"] < 1e-3 and abs(r["mean_dot"] - r["formula"]) < 1e-3, r
# noam: the peak is at step = warmup with rate (d_model * warmup)^-0.5.
for r in table("noam"):
    assert r["peak_step"] == r["warmup"] and abs(r["peak_lr"] - r["formula_peak_lr"]) < 1e-12, r
    assert abs(r["lr_at_100k"] - r["d_model"] ** -0.5 * 100000 ** -0.5) < 1e-12, r
# masks: padding masks (mask 0) hide 6 - length keys from each of 6 queries, the causal one 15 entries;
# the weights on masked keys are exactly 0 and rows sum to 1.
for r in table("masks"):
    assert r["masked_entries"] == (6 * (6 - r["length"]) if r["mask"] == 0 else 15), r
    assert r["max_weight_on_masked"] == 0 and abs(r["min_row_sum"] - 1) < 1e-12 and abs(r["max_row_sum"] - 1) < 1e-12, r
# label smoothing: the targets read back from the loss's gradient are (1 - eps + eps/V, eps/V); runs give finite numbers.
for r in table("label-smoothing-targets"):
    assert abs(r["q_target"] - (1 - r["eps"] + r["eps"] / 10)) < 1e-12 and abs(r["q_other"] - r["eps"] / 10) < 1e-12, r
    assert abs(r["q_sum"] - 1) < 1e-12, r
runs = table("label-smoothing")
assert sorted({r["eps"] for r in runs}) == [0, 0.1] and len(runs) == 4, runs
assert all(1 < r["val_ppl"] < 1e6 and 0 <= r["val_bleu"] <= 100 for r in runs), runs
# norm-warmup: per-layer norms add up to the global one; pre-norm alone has final norms; the first
# gradient comes before any update, so it is the same with and without warm-up.
rows = table("norm-warmup")
assert len(rows) == 4 * 2, len(rows)
layer_names = [k for k in rows[0] if k not in ("pre_norm", "warmup", "step", "loss", "grad_norm")]
for r in rows:
    parts = [r[k] for k in layer_names if not math.isnan(r[k])]
    # the CSV keeps 8 decimals, so each printed norm is off by up to 5e-9
    assert abs(math.sqrt(sum(p * p for p in parts)) - r["grad_norm"]) < 2e-8 * len(parts), r
    assert math.isnan(r["encoder.norm"]) == (r["pre_norm"] == 0), r
first = {(r["pre_norm"], r["warmup"]): r for r in rows if r["step"] == 1}
for pre in (0, 1):
    assert first[(pre, 100)]["grad_norm"] == first[(pre, 1)]["grad_norm"], first
    assert first[(0, 100)]["grad_norm"] != first[(1, 100)]["grad_norm"]
PY
echo "cli_study: every study's picture and table check out"
