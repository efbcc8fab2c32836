// BLEU against sacreBLEU. Provenance of every expected value: sacreBLEU 2.6.0
// (github.com/mjpost/sacrebleu at f615c72, run from a fetched copy under
// /usr/bin/python3): Tokenizer13a()(line) for the tokenizations and
// BLEU().corpus_score(hyps, refs) (defaults: 13a, mixed case, exp smoothing) for
// the scores, printed with repr().
#include <doctest/doctest.h>

#include <string>
#include <utility>
#include <vector>

#include "helpers.h"
#include "loom/models/bleu.h"

using namespace loom;
using namespace loom::models;
using loom::testing::error_of;

namespace {
const std::vector<std::string> kHyps = {"The cat sat on the mat.",
                                        "He paid $3,000.50 for 12-15 items, e.g. apples.",
                                        "She said &quot;hello&quot; &amp; left... (quickly)",
                                        "Ein Mann läuft über die Straße.",
                                        "",
                                        "Hello,world.This is 3.14 and 1,000 - fine!",
                                        "x"};
const std::vector<std::string> kRef1 = {"The cat is sitting on the mat.",
                                        "He paid $3,000.50 for 12 - 15 items, e.g., apples.",
                                        "She said \"hello\" & left (quickly).",
                                        "Ein Mann geht über die Straße.",
                                        "Nothing here.",
                                        "Hello, world. This is 3.14 and 1,000-fine!",
                                        "y"};
const std::vector<std::string> kRef2 = {"A cat sat on a mat.",
                                        "He paid 3000 dollars for 12-15 items.",
                                        "She said hello and left quickly.",
                                        "Ein Mann läuft auf der Straße.",
                                        "Empty.",
                                        "Hello world, this is pi.",
                                        "x y"};
}  // namespace

TEST_CASE("tokenize_13a matches sacreBLEU's Tokenizer13a") {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"He paid $3,000.50 for 12-15 items, e.g. apples.", "He paid $ 3,000.50 for 12 - 15 items , e . g . apples ."},
      {"She said &quot;hello&quot; &amp; left... (quickly)", "She said \" hello \" & left . . . ( quickly )"},
      {"Ein Mann läuft über die Straße.", "Ein Mann läuft über die Straße ."},
      {"", ""},
      {"Hello,world.This is 3.14 and 1,000 - fine!", "Hello , world . This is 3.14 and 1,000 - fine !"},
      {"He paid $3,000.50 for 12 - 15 items, e.g., apples.",
       "He paid $ 3,000.50 for 12 - 15 items , e . g . , apples ."},
      {"a-b 3-4 x.y 3.y x.3 \"q\" {b} [c] 'd' ~e~ ^f `g` @h #i %j",
       "a-b 3 - 4 x . y 3 . y x . 3 \" q \" { b } [ c ] 'd' ~ e ~ ^ f ` g ` @ h # i % j"},
      {"tab\there  and\xc2\xa0nbsp", "tab here and nbsp"},  // U+00A0 splits, as in Python's str.split()
  };
  for (const auto& [line, expected] : cases) {
    INFO(line);
    CHECK(tokenize_13a(line) == expected);
  }
}

TEST_CASE("corpus_bleu matches sacreBLEU: one and two references, zero matches, clipped counts") {
  BleuScore one = corpus_bleu(kHyps, {kRef1});
  CHECK(one.score == doctest::Approx(72.65172490953775).epsilon(1e-12));
  CHECK(one.correct == std::array<int64_t, 4>{51, 41, 32, 26});
  CHECK(one.total == std::array<int64_t, 4>{56, 50, 45, 40});
  CHECK(one.sys_len == 56);
  CHECK(one.ref_len == 59);
  CHECK(one.str() == "BLEU = 72.65 91.1/82.0/71.1/65.0 (BP = 0.948 ratio = 0.949 hyp_len = 56 ref_len = 59)");

  BleuScore two = corpus_bleu(kHyps, {kRef1, kRef2});
  CHECK(two.score == doctest::Approx(78.92448970851451).epsilon(1e-12));
  CHECK(two.correct == std::array<int64_t, 4>{54, 44, 34, 26});
  CHECK(two.ref_len == 57);

  CHECK(corpus_bleu({"a b c d"}, {{"e f g h"}}).score == 0.0);
  BleuScore clipped = corpus_bleu({"the the the the", "cat"}, {{"the cat", "the cat"}});
  CHECK(clipped.score == doctest::Approx(17.965205598154213).epsilon(1e-12));
  CHECK(clipped.correct == std::array<int64_t, 4>{2, 0, 0, 0});
  CHECK(clipped.total == std::array<int64_t, 4>{5, 3, 2, 1});

  CHECK(error_of([] {
          corpus_bleu({"a", "b"}, {{"a"}});
        }) == "corpus_bleu: reference set 0 has 1 sentences but there are 2 hypotheses");
}
