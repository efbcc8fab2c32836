# Shared by the command-line tests (sourced): a made-up parallel corpus and `fail`.
# The sourcing script sets $dir (a scratch folder) and $test_name, or calls
# scratch_with_background_run after sourcing.

fail() { echo "$test_name: $*" >&2; exit 1; }

# A toy "language pair": each source word maps to a target word, order kept.
#   make_corpus <split> <count>  ->  $dir/<split>.de, $dir/<split>.en
make_corpus() {
  local words_de=(Hund Katze Mann Frau Kind Ball Haus Baum läuft sitzt spielt rot blau groß klein)
  local words_en=(dog cat man woman child ball house tree runs sits plays red blue big small)
  : > "$dir/$1.de"; : > "$dir/$1.en"
  for ((i = 0; i < $2; i++)); do
    local de="" en=""
    for ((k = 0; k < 3 + i % 5; k++)); do
      local w=$(((i * 7 + k * 3) % 15))
      de+="${words_de[$w]} "; en+="${words_en[$w]} "
    done
    echo "${de% }" >> "$dir/$1.de"; echo "${en% }" >> "$dir/$1.en"
  done
}

# A scratch folder in $dir, removed at exit with the background loom in $pid (if any) killed;
# training threads kept from spinning on a busy machine (docs/benchmarks.md).
scratch_with_background_run() {
  dir=$(mktemp -d)
  pid=""
  trap '[[ -n $pid ]] && kill -9 $pid 2> /dev/null; rm -rf "$dir"' EXIT
  export GOMP_SPINCOUNT=10000
}

# Waits (up to a minute) until <log> has a line matching <pattern>, or the background $pid has ended.
#   wait_for_line <pattern> <log>
wait_for_line() {
  for _ in $(seq 1200); do
    grep -q "$1" "$2" && return 0
    kill -0 "$pid" 2> /dev/null || return 0
    sleep 0.05
  done
}
