# Shared by the command-line tests (sourced): a made-up parallel corpus and `fail`.
# The sourcing script sets $dir (a scratch folder) and $test_name.

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
