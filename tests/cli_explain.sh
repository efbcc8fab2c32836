#!/usr/bin/env bash
# `loom explain OP`: formulas, shape rule, both Jacobians side by side and a max
# error equal to the one `loom gradcheck OP` prints for the same sample; an
# unknown op names the near matches.
#   tests/cli_explain.sh <path to the loom binary>
set -euo pipefail
loom="$1"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
test_name=cli_explain
source "$(dirname "$0")/cli_lib.sh"

"$loom" explain tanh > "$dir/tanh.txt" || { cat "$dir/tanh.txt"; fail "loom explain tanh failed"; }
for want in "forward     y = tanh x" "derivative  dx = tanh_backward(y, g)" "analytic (backward)" \
  "numeric (central differences)" "gradcheck: max abs error" "gradgradcheck: max abs error"; do
  grep -qF "$want" "$dir/tanh.txt" || { cat "$dir/tanh.txt"; fail "explain tanh: no '$want'"; }
done

# The same max error as gradcheck's row for that sample (both print it with %.3e).
"$loom" gradcheck tanh > "$dir/gc.txt"
sample=$(sed -n 's/^sample [0-9]* (\(.*\)), float64:$/\1/p' "$dir/tanh.txt")
explain_err=$(sed -n 's/^gradcheck: max abs error \([^,]*\),.*/\1/p' "$dir/tanh.txt")
gc_err=$(awk -v s="$sample" '$1 == "tanh" && index($0, s) && $0 ~ / gradcheck / {print $(NF-2)}' "$dir/gc.txt" | head -1)
[[ -n "$explain_err" && "$explain_err" == "$gc_err" ]] ||
  fail "explain's max error '$explain_err' differs from gradcheck's '$gc_err' (sample '$sample')"

"$loom" explain mul --sample 3 | grep -q "^sample 3 (0-d)" || fail "--sample 3 not honoured"
"$loom" explain argmax | grep -q "not differentiable" || fail "argmax: no forward-only note"

if "$loom" explain tahn > "$dir/out" 2> "$dir/err"; then fail "an unknown op succeeded"; fi
grep -q "no op named 'tahn'; did you mean tanh" "$dir/err" || { cat "$dir/err"; fail "no near match listed"; }
if "$loom" explain tanh --sample 7 > "$dir/out" 2> "$dir/err"; then fail "--sample 7 succeeded"; fi
grep -q "tanh has 2 samples" "$dir/err" || { cat "$dir/err"; fail "bad --sample message"; }
echo "$test_name: ok"
