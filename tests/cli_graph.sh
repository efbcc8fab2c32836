#!/usr/bin/env bash
# `loom graph`: SVG and PNG files drawn by Graphviz (checked by their magic bytes),
# the DOT beside them with the expected nodes and gradient norms, the NaN
# highlight, the built-in examples, and clear errors for bad expressions.
#   tests/cli_graph.sh <path to the loom binary>
set -euo pipefail
loom="$1"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
test_name=cli_graph
source "$(dirname "$0")/cli_lib.sh"

is_png() { [[ -s "$1" && "$(head -c 8 "$1" | od -An -tx1 | tr -d ' \n')" == "89504e470d0a1a0a" ]]; }
is_svg() { [[ -s "$1" ]] && head -c 400 "$1" | grep -q "<svg" && tail -c 20 "$1" | grep -q "</svg>"; }

"$loom" graph --expr "tanh(x*w + b)" --out "$dir/neuron" > "$dir/log" || { cat "$dir/log"; fail "graph --expr failed"; }
is_png "$dir/neuron.png" || fail "neuron.png is not a PNG"
is_svg "$dir/neuron.svg" || fail "neuron.svg is not an SVG"
# sum (to a scalar), tanh, add, mul and the three variables; every edge carries a norm.
[[ $(grep -c '^ *n[0-9]* \[label=' "$dir/neuron.dot") -eq 7 ]] || { cat "$dir/neuron.dot"; fail "expected 7 nodes"; }
for name in x w b; do grep -q "label=\"$name (requires grad)" "$dir/neuron.dot" || fail "no leaf named $name"; done
[[ $(grep -c -- '-> n[0-9]* \[label="[0-9.e+-]*"\]' "$dir/neuron.dot") -eq 7 ]] || fail "not every edge has a gradient norm"
grep -q "<text[^>]*>tanh</text>" "$dir/neuron.svg" || fail "the SVG does not show the tanh node"

"$loom" graph --expr "sum(x @ w)" --shape x=2x3 --shape w=3x4 --out "$dir/mm" > /dev/null
grep -q 'matmul\\n\[2, 4\] float64' "$dir/mm.dot" || fail "matmul node with shape [2, 4] missing"

"$loom" graph --expr "exp(log(x - 10)) + relu(-y*y)" --out "$dir/nan" > "$dir/log"
grep -q "first NaN/Inf in the forward pass: log" "$dir/log" || { cat "$dir/log"; fail "no NaN producer named"; }
grep -q 'label="log.*first NaN/Inf (forward)", style=filled, fillcolor=red' "$dir/nan.dot" || fail "log not highlighted"
grep -q '0 (all zero)' "$dir/nan.dot" || fail "the zero gradient through relu is not marked"
is_png "$dir/nan.png" || fail "nan.png is not a PNG"

# A threshold below the step's node count, whatever the model's ops fuse: each layer one box.
"$loom" graph --example step --out "$dir/step" --collapse-above 100 > /dev/null
is_png "$dir/step.png" && is_svg "$dir/step.svg" || fail "step pictures missing"
for layer in encoder.layers.0 encoder.layers.1 decoder.layers.0 decoder.layers.1; do
  grep -q "\"scope $layer\" \[label=\"$layer" "$dir/step.dot" || fail "step: $layer not collapsed to one box"
done
grep -q 'label="label_smoothed_cross_entropy' "$dir/step.dot" || fail "step: no loss node"
"$loom" graph --example layer --out "$dir/layer" --collapse-above 100000 > /dev/null
grep -q 'subgraph cluster_0' "$dir/layer.dot" || fail "layer: no cluster"
grep -q 'self_attn.w_q.weight (requires grad)' "$dir/layer.dot" || fail "layer: parameters not named"

if "$loom" graph --expr "tanh(x" --out "$dir/bad" 2> "$dir/err"; then fail "an unclosed parenthesis was accepted"; fi
grep -q "expected ')'" "$dir/err" || { cat "$dir/err"; fail "no message for the missing ')'"; }
if "$loom" graph --expr "foo(x)" --out "$dir/bad" 2> "$dir/err"; then fail "an unknown function was accepted"; fi
grep -q "no function 'foo'" "$dir/err" || { cat "$dir/err"; fail "no message for foo"; }
if "$loom" graph --expr "x @ w" --shape x=2x3 --shape w=2x3 --out "$dir/bad" 2> "$dir/err"; then fail "[2,3] @ [2,3] was accepted"; fi
grep -q '@ failed: matmul' "$dir/err" || { cat "$dir/err"; fail "no message for the matmul shapes"; }
if "$loom" graph --out "$dir/bad" 2> "$dir/err"; then fail "no input was accepted"; fi
grep -q "give --expr" "$dir/err" || { cat "$dir/err"; fail "no message for a missing --expr"; }
echo "$test_name: ok"
