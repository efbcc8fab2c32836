#pragma once
// Corpus BLEU exactly as sacreBLEU computes it by default (Post, 2018): the
// mteval-v13a tokenizer, case-sensitive, n-grams up to 4, the "exp" smoothing
// of mteval (a zero n-gram precision becomes 1 / (2^k * total)), brevity penalty
// against the closest reference length; signature
// nrefs:N|case:mixed|eff:no|tok:13a|smooth:exp. Checked against sacreBLEU 2.6
// in tests/test_bleu.cpp.
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace loom::models {

struct BleuScore {
  double score = 0;                    // 0..100
  std::array<double, 4> precisions{};  // percent, after smoothing
  std::array<int64_t, 4> correct{}, total{};
  double brevity_penalty = 0;
  int64_t sys_len = 0, ref_len = 0;
  // "BLEU = 42.38 85.7/66.7/40.0/25.0 (BP = 0.867 ratio = 0.875 hyp_len = 14 ref_len = 16)", as sacreBLEU prints it.
  std::string str() const;
};

// mteval-v13a tokenization: unescapes &quot; &amp; &lt; &gt;, splits punctuation
// off words (periods and commas only when not next to a digit, dashes only after
// a digit), and collapses whitespace. UTF-8 passes through untouched.
std::string tokenize_13a(std::string_view line);

// hypotheses[i] is scored against references[r][i] for every reference set r.
BleuScore corpus_bleu(const std::vector<std::string>& hypotheses,
                      const std::vector<std::vector<std::string>>& references);

}  // namespace loom::models
