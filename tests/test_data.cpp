// The translation pipeline's data side: reading plain and gzip corpora, a
// SentencePiece vocabulary trained here, and token-budget batches.
#include <doctest/doctest.h>
#include <zlib.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include "helpers.h"
#include "loom/models/data.h"

using namespace loom;
using namespace loom::models;
using loom::testing::error_of;

namespace {
std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("loom_test_" + name)).string();
}
}  // namespace

TEST_CASE("read_lines: plain and gzip text, CRLF endings, a missing last newline; errors name the file") {
  const std::string plain = temp_path("plain.txt"), packed = temp_path("packed.txt.gz");
  std::ofstream(plain, std::ios::binary) << "first line\r\nzweite Zeile\n\nlast without newline";
  gzFile gz = gzopen(packed.c_str(), "wb");
  const std::string text = "a b c\nd e\n";
  gzwrite(gz, text.data(), static_cast<unsigned>(text.size()));
  gzclose(gz);
  CHECK(read_lines(plain) == std::vector<std::string>{"first line", "zweite Zeile", "", "last without newline"});
  CHECK(read_lines(packed) == std::vector<std::string>{"a b c", "d e"});
  CHECK(error_of([&] { read_parallel(plain, packed); }) ==
        "read_parallel: '" + plain + "' has 4 lines but '" + packed + "' has 2: the sides are not aligned");
  CHECK(error_of([] { read_lines("/nonexistent/corpus.de.gz"); }).find("cannot open '/nonexistent/corpus.de.gz'") !=
        std::string::npos);
  // A gzip stream cut in half.
  std::string bytes;
  {
    std::ifstream in(packed, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  std::ofstream(packed, std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  CHECK(error_of([&] { read_lines(packed); }).find("'" + packed + "' is corrupt or truncated") != std::string::npos);
  std::remove(plain.c_str());
  std::remove(packed.c_str());
}

TEST_CASE("Vocabulary: trained here, special ids fixed, encode/decode round trip") {
  std::vector<std::string> sentences;
  const char* words[] = {"ein", "Mann", "eine", "Frau", "läuft", "sitzt", "auf", "der", "Straße", "im", "Park"};
  for (int i = 0; i < 400; ++i)
    sentences.push_back(std::string(words[i % 4]) + " " + words[4 + i % 2] + " " + words[6 + i % 3] + " " +
                        words[9 + i % 2] + ".");
  const std::string prefix = temp_path("spm");
  Vocabulary::train(sentences, prefix, 30);
  Vocabulary vocab(prefix + ".model");
  CHECK(vocab.size() == 30);
  for (const std::string& s : {sentences[0], sentences[7], std::string("eine Frau sitzt im Park.")}) {
    std::vector<int64_t> ids = vocab.encode(s);
    CHECK(!ids.empty());
    for (int64_t id : ids) CHECK((id > Vocabulary::kEos && id < 30));
    ids.push_back(Vocabulary::kEos);
    ids.push_back(17);  // after eos: ignored
    CHECK(vocab.decode(ids) == s);
  }
  CHECK(error_of([&] { vocab.decode({30}); }) == "Vocabulary: id 30 is out of range for a vocabulary of 30");
  CHECK(error_of([] {
          Vocabulary missing("/nonexistent/spm.model");
        }).find("Vocabulary: cannot load the SentencePiece model '/nonexistent/spm.model'") != std::string::npos);
  std::remove((prefix + ".model").c_str());
  std::remove((prefix + ".vocab").c_str());
}

TEST_CASE(
    "make_batches: within the token budget, every pair once, shifted targets, the same batches for a seed, either "
    "grouping") {
  std::vector<EncodedPair> pairs;
  for (int64_t i = 0; i < 200; ++i) {
    EncodedPair p;
    for (int64_t k = 0; k < 3 + i % 17; ++k) p.src.push_back(10 + (i + k) % 50);
    for (int64_t k = 0; k < 2 + (i * 7) % 19; ++k) p.tgt.push_back(10 + (i * 3 + k) % 50);
    pairs.push_back(p);
  }
  pairs.push_back({std::vector<int64_t>(100, 5), {6}});  // too long: dropped
  Grouping grouping = Grouping::fixed;
  SUBCASE("the same groups at every call") {}
  SUBCASE("groups drawn at every call") { grouping = Grouping::drawn; }
  Generator gen(7), again(7);
  std::vector<Batch> batches = make_batches(pairs, 256, 64, gen, grouping);
  std::vector<Batch> same = make_batches(pairs, 256, 64, again, grouping);
  REQUIRE(batches.size() == same.size());
  int64_t sentences = 0, tgt_tokens = 0;
  std::multiset<std::vector<int64_t>> seen;
  for (size_t b = 0; b < batches.size(); ++b) {
    const Batch& batch = batches[b];
    CHECK(batch.src.to_vector<int64_t>() == same[b].src.to_vector<int64_t>());
    const int64_t rows = batch.src.shape()[0], T = batch.tgt_in.shape()[1];
    CHECK(rows * std::max(batch.src.shape()[1], T) <= 256);
    auto in = batch.tgt_in.to_vector<int64_t>(), out = batch.tgt_out.to_vector<int64_t>();
    for (int64_t r = 0; r < rows; ++r) {
      CHECK(in[r * T] == Vocabulary::kBos);
      std::vector<int64_t> target;
      for (int64_t t = 0; t < T && out[r * T + t] != Vocabulary::kEos; ++t) {
        if (t + 1 < T) CHECK(in[r * T + t + 1] == out[r * T + t]);  // tgt_in is tgt_out shifted right
        target.push_back(out[r * T + t]);
      }
      seen.insert(target);
    }
    sentences += rows;
    tgt_tokens += batch.tgt_tokens;
  }
  CHECK(sentences == 200);
  int64_t expected_tokens = 0;
  std::multiset<std::vector<int64_t>> expected;
  for (size_t i = 0; i < 200; ++i) {
    expected.insert(pairs[i].tgt);
    expected_tokens += static_cast<int64_t>(pairs[i].tgt.size()) + 1;
  }
  CHECK(seen == expected);
  CHECK(tgt_tokens == expected_tokens);
}

namespace {
// The sentences (by their first source piece) that share each batch.
std::multiset<std::set<int64_t>> companions(const std::vector<Batch>& batches) {
  std::multiset<std::set<int64_t>> groups;
  for (const Batch& batch : batches) {
    const auto src = batch.src.to_vector<int64_t>();
    const int64_t rows = batch.src.shape()[0], S = batch.src.shape()[1];
    std::set<int64_t> group;
    for (int64_t r = 0; r < rows; ++r) group.insert(src[r * S]);
    groups.insert(group);
  }
  return groups;
}
}  // namespace

TEST_CASE("make_batches: Grouping::drawn changes the batches' companions at every call; fixed keeps them") {
  // 12 length pairs, each shared by ~25 sentences: ties the drawn order decides.
  std::vector<EncodedPair> pairs;
  for (int64_t i = 0; i < 300; ++i) {
    EncodedPair p;
    p.src.push_back(100 + i);  // names the sentence
    for (int64_t k = 0; k < 2 + i % 4; ++k) p.src.push_back(10 + k);
    for (int64_t k = 0; k < 2 + i % 3; ++k) p.tgt.push_back(10 + k);
    pairs.push_back(p);
  }
  Generator gen(3), again(3);
  const auto fixed = companions(make_batches(pairs, 64, 32, gen));
  CHECK(companions(make_batches(pairs, 64, 32, gen)) == fixed);  // a later offset: the same groups
  CHECK(count_batches(pairs, 64, 32) == static_cast<int64_t>(fixed.size()));
  const auto drawn = companions(make_batches(pairs, 64, 32, gen, Grouping::drawn));
  const auto next = companions(make_batches(pairs, 64, 32, gen, Grouping::drawn));
  CHECK(drawn != fixed);
  CHECK(next != drawn);
  for (const auto* groups : {&drawn, &next}) {  // every sentence once
    std::set<int64_t> all;
    size_t count = 0;
    for (const auto& group : *groups) all.insert(group.begin(), group.end()), count += group.size();
    CHECK(all.size() == 300);
    CHECK(count == 300);
  }
  // The same seed and offset draw the same groups.
  for (int call = 0; call < 2; ++call) make_batches(pairs, 64, 32, again);
  CHECK(companions(make_batches(pairs, 64, 32, again, Grouping::drawn)) == drawn);
}

TEST_CASE("UTF-8 as RFC 3629 has it: overlong forms, surrogates, code points past U+10FFFF and cut sequences refused") {
  constexpr size_t ok = std::string_view::npos;
  CHECK(invalid_utf8_at("plain ASCII") == ok);
  CHECK(invalid_utf8_at("Gr\xC3\xBC\xC3\x9F"
                        "e \xE2\x82\xAC \xF0\x9D\x84\x9E \xF4\x8F\xBF\xBF") == ok);  // ü ß € 𝄞 U+10FFFF
  CHECK(invalid_utf8_at("\xFF\xFE\x80") == 0);
  CHECK(invalid_utf8_at("ab\xC0\x80") == 2);         // overlong NUL
  CHECK(invalid_utf8_at("a\xE0\x80\xAF") == 1);      // overlong '/'
  CHECK(invalid_utf8_at("\xED\xA0\x80") == 0);       // a surrogate
  CHECK(invalid_utf8_at("x\xF4\x90\x80\x80") == 1);  // past U+10FFFF
  CHECK(invalid_utf8_at("\xE2\x82") == 0);           // cut short
  CHECK(invalid_utf8_at("\xE2\x28\xA1") == 0);       // a bad continuation byte
  const std::string path = (std::filesystem::temp_directory_path() / "loom_test_bad_utf8.txt").string();
  std::ofstream(path, std::ios::binary) << "good\nGr\xC3\xBC\xC3\x9F"
                                           "e\nbad \xC3\x28 line\n";
  CHECK(error_of([&] { read_lines(path); }) == "'" + path + "': line 3 is not UTF-8 text (byte 5 of the line is 0xc3)");
  std::remove(path.c_str());
}
