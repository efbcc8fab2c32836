#include "loom/models/bleu.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <unordered_map>

#include "loom/error.h"

namespace loom::models {

namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// The first rule of 13a: ASCII punctuation other than ' , - . becomes its own token.
bool always_split(char c) {
  const unsigned char u = static_cast<unsigned char>(c);
  return (u >= '{' && u <= '~') || (u >= '[' && u <= '`') || (u >= ' ' && u <= '&') || (u >= '(' && u <= '+') ||
         (u >= ':' && u <= '@') || u == '/';
}

std::string replace_all(std::string s, std::string_view from, std::string_view to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
  return s;
}

// Length in bytes of the Unicode whitespace character starting at s[i] (as
// Python's str.split() knows them), or 0.
size_t whitespace_at(std::string_view s, size_t i) {
  const auto b = [&](size_t k) { return i + k < s.size() ? static_cast<unsigned char>(s[i + k]) : 0u; };
  const unsigned c = b(0);
  if (c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f)) return 1;
  if (c == 0xC2 && (b(1) == 0x85 || b(1) == 0xA0)) return 2;  // NEL, no-break space
  if (c == 0xE1 && b(1) == 0x9A && b(2) == 0x80) return 3;    // ogham space
  if (c == 0xE2 && b(1) == 0x80 && (b(2) <= 0x8A || b(2) == 0xA8 || b(2) == 0xA9 || b(2) == 0xAF)) return 3;
  if (c == 0xE2 && b(1) == 0x81 && b(2) == 0x9F) return 3;  // medium math space
  if (c == 0xE3 && b(1) == 0x80 && b(2) == 0x80) return 3;  // ideographic space
  return 0;
}

std::vector<std::string_view> split_words(std::string_view s) {
  std::vector<std::string_view> words;
  size_t i = 0;
  while (i < s.size()) {
    if (size_t w = whitespace_at(s, i)) {
      i += w;
      continue;
    }
    size_t start = i;
    while (i < s.size() && whitespace_at(s, i) == 0) ++i;
    words.push_back(s.substr(start, i - start));
  }
  return words;
}

// One left-to-right pass of a two-character rule: where first(s[i]) and
// second(s[i+1]) hold, emit s[i] and s[i+1] with spaces per `emit`, and skip
// both (the non-overlapping scan of Python's re.sub).
template <typename First, typename Second, typename Emit>
std::string pair_rule(const std::string& s, First first, Second second, Emit emit) {
  std::string out;
  out.reserve(s.size() * 2);
  size_t i = 0;
  while (i < s.size()) {
    if (i + 1 < s.size() && first(s[i]) && second(s[i + 1])) {
      emit(out, s[i], s[i + 1]);
      i += 2;
    } else {
      out += s[i++];
    }
  }
  return out;
}

using NgramCounts = std::unordered_map<std::string, int64_t>;

// n-grams of orders 1..4 (joined with a byte that never occurs inside a token).
NgramCounts ngrams(const std::vector<std::string_view>& tokens) {
  NgramCounts counts;
  for (size_t n = 1; n <= 4; ++n)
    for (size_t i = 0; i + n <= tokens.size(); ++i) {
      std::string key(1, static_cast<char>('0' + n));
      for (size_t k = 0; k < n; ++k) (key += '\x1f') += tokens[i + k];
      ++counts[key];
    }
  return counts;
}

}  // namespace

std::string tokenize_13a(std::string_view input) {
  std::string line(input);
  line = replace_all(line, "<skipped>", "");
  line = replace_all(line, "-\n", "");
  line = replace_all(line, "\n", " ");
  if (line.find('&') != std::string::npos) {
    line = replace_all(line, "&quot;", "\"");
    line = replace_all(line, "&amp;", "&");
    line = replace_all(line, "&lt;", "<");
    line = replace_all(line, "&gt;", ">");
  }
  std::string s = " " + line + " ";
  std::string spaced;
  for (char c : s) {
    if (always_split(c))
      (spaced += ' ') += c, spaced += ' ';
    else
      spaced += c;
  }
  auto period_or_comma = [](char c) { return c == '.' || c == ','; };
  auto not_digit = [](char c) { return !is_digit(c); };
  spaced = pair_rule(spaced, not_digit, period_or_comma,
                     [](std::string& o, char a, char b) { ((o += a) += ' ') += b, o += ' '; });
  spaced = pair_rule(spaced, period_or_comma, not_digit,
                     [](std::string& o, char a, char b) { ((o += ' ') += a) += ' ', o += b; });
  spaced = pair_rule(
      spaced, is_digit, [](char c) { return c == '-'; },
      [](std::string& o, char a, char b) { ((o += a) += ' ') += b, o += ' '; });
  std::string out;
  for (std::string_view w : split_words(spaced)) {
    if (!out.empty()) out += ' ';
    out += w;
  }
  return out;
}

BleuScore corpus_bleu(const std::vector<std::string>& hypotheses,
                      const std::vector<std::vector<std::string>>& references) {
  LOOM_CHECK(!references.empty(), "corpus_bleu: no reference sets given");
  for (size_t r = 0; r < references.size(); ++r)
    LOOM_CHECK(references[r].size() == hypotheses.size(),
               "corpus_bleu: reference set {} has {} sentences but there are {} hypotheses", r, references[r].size(),
               hypotheses.size());
  BleuScore s;
  for (size_t i = 0; i < hypotheses.size(); ++i) {
    const std::string hyp = tokenize_13a(hypotheses[i]);
    const auto hyp_tokens = split_words(hyp);
    const NgramCounts hyp_ngrams = ngrams(hyp_tokens);
    // Reference n-gram counts: the maximum over the references; length: the closest (shorter on ties).
    NgramCounts ref_ngrams;
    int64_t closest = -1, closest_diff = -1;
    for (const auto& set : references) {
      const std::string ref = tokenize_13a(set[i]);
      const auto ref_tokens = split_words(ref);
      for (const auto& [gram, count] : ngrams(ref_tokens)) ref_ngrams[gram] = std::max(ref_ngrams[gram], count);
      const int64_t len = static_cast<int64_t>(ref_tokens.size());
      const int64_t diff = std::llabs(static_cast<int64_t>(hyp_tokens.size()) - len);
      if (closest_diff == -1 || diff < closest_diff || (diff == closest_diff && len < closest)) {
        closest_diff = diff;
        closest = len;
      }
    }
    s.sys_len += static_cast<int64_t>(hyp_tokens.size());
    s.ref_len += closest;
    for (const auto& [gram, count] : hyp_ngrams) {
      const int n = gram[0] - '1';
      s.total[n] += count;
      auto it = ref_ngrams.find(gram);
      if (it != ref_ngrams.end()) s.correct[n] += std::min(count, it->second);
    }
  }
  s.brevity_penalty =
      s.sys_len < s.ref_len ? (s.sys_len > 0 ? std::exp(1.0 - static_cast<double>(s.ref_len) / s.sys_len) : 0.0) : 1.0;
  if (std::all_of(s.correct.begin(), s.correct.end(), [](int64_t c) { return c == 0; })) return s;
  double smooth = 1, log_sum = 0;
  for (int n = 0; n < 4; ++n) {
    if (s.total[n] == 0) break;  // sacreBLEU stops here; the remaining precisions stay 0
    if (s.correct[n] == 0) {
      smooth *= 2;
      s.precisions[n] = 100.0 / (smooth * static_cast<double>(s.total[n]));
    } else {
      s.precisions[n] = 100.0 * static_cast<double>(s.correct[n]) / static_cast<double>(s.total[n]);
    }
  }
  for (double p : s.precisions) log_sum += p == 0.0 ? -9999999999.0 : std::log(p);
  // exp(log 100) can round to 100.00000000000004 (found by fuzz_bleu): BLEU never exceeds 100.
  s.score = std::min(100.0, s.brevity_penalty * std::exp(log_sum / 4));
  return s;
}

std::string BleuScore::str() const {
  return fmt::format("BLEU = {:.2f} {:.1f}/{:.1f}/{:.1f}/{:.1f} (BP = {:.3f} ratio = {:.3f} hyp_len = {} ref_len = {})",
                     score, precisions[0], precisions[1], precisions[2], precisions[3], brevity_penalty,
                     ref_len ? static_cast<double>(sys_len) / ref_len : 0.0, sys_len, ref_len);
}

}  // namespace loom::models
