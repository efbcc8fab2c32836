#!/usr/bin/env bash
# The code is written in the style .clang-format describes (Google's, 120 columns):
# every C++ and CUDA source is what clang-format makes of it, so no line is longer.
#   tests/style.sh <source dir>
set -euo pipefail
cd "$1"
command -v clang-format >/dev/null || { echo "style: clang-format not found (scripts/setup installs it)"; exit 1; }
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  mapfile -t files < <(git ls-files '*.cpp' '*.h' '*.cu')
else
  mapfile -t files < <(find core nn ops optim models tools tests cuda examples fuzz -name '*.cpp' -o -name '*.h' -o -name '*.cu')
fi
[[ ${#files[@]} -gt 100 ]] || { echo "style: found only ${#files[@]} sources"; exit 1; }
bad=()
for f in "${files[@]}"; do
  clang-format --dry-run --Werror "$f" 2>/dev/null || bad+=("$f")
done
if [[ ${#bad[@]} -gt 0 ]]; then
  echo "style: ${#bad[@]} files differ from clang-format's output (run: clang-format -i FILE):"
  printf '  %s\n' "${bad[@]}"
  exit 1
fi
echo "style: ${#files[@]} sources as clang-format writes them"
