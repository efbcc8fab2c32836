// libFuzzer: `loom bleu`'s inputs. Lines alternate hypothesis / reference; the
// score of any text must be a number from 0 to 100 (a loom::Error only for
// sets of different sizes, which alternation makes when the count is odd).
#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "loom/models.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  std::vector<std::string> hypotheses, references;
  int i = 0;
  for (std::string line; std::getline(in, line); ++i) (i % 2 ? references : hypotheses).push_back(line);
  try {
    const loom::models::BleuScore s = loom::models::corpus_bleu(hypotheses, {references});
    if (!(s.score >= 0 && s.score <= 100)) __builtin_trap();
    (void)s.str();
  } catch (const loom::Error&) {
    if (hypotheses.size() == references.size()) __builtin_trap();  // equal sets must score
  }
  return 0;
}
