#include "training_corpus.h"

#include <fmt/core.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>

#include "loom/atomic_file.h"
#include "loom/byte_hash.h"
#include "loom/error.h"

namespace loom::tools {

Split read_split(const std::string& data, const std::string& src, const std::string& tgt, const std::string& name) {
  Split s{name, models::corpus_file(data, name, src, "train"), models::corpus_file(data, name, tgt, "train"), {}};
  s.corpus = models::read_parallel(s.src_path, s.tgt_path);
  auto check = [&](const std::vector<std::string>& lines, const std::string& path) {
    LOOM_CHECK(!lines.empty(), "train: the {} split '{}' is empty", name, path);
    LOOM_CHECK(!std::all_of(lines.begin(), lines.end(), models::is_blank),
               "train: the {} split '{}' has {} lines, all blank", name, path, lines.size());
  };
  check(s.corpus.src, s.src_path);
  check(s.corpus.tgt, s.tgt_path);
  return s;
}

std::vector<models::EncodedPair> encode(const models::Vocabulary& vocab, const models::ParallelCorpus& corpus) {
  std::vector<models::EncodedPair> pairs(corpus.src.size());
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < pairs.size(); ++i) pairs[i] = {vocab.encode(corpus.src[i]), vocab.encode(corpus.tgt[i])};
  return pairs;
}

std::vector<models::EncodedPair> keep_fitting(std::vector<models::EncodedPair> pairs, const Split& split,
                                              int64_t max_len) {
  const size_t total = pairs.size();
  std::erase_if(pairs, [&](const models::EncodedPair& p) { return !models::fits(p, max_len); });
  const size_t dropped = total - pairs.size();
  LOOM_CHECK(!pairs.empty(), "train: --max-len {} drops all {} pairs of the {} split ('{}', '{}')", max_len, total,
             split.name, split.src_path, split.tgt_path);
  if (dropped)
    fmt::print("{}: dropped {} of {} pairs longer than --max-len {} pieces\n", split.name, dropped, total, max_len);
  return pairs;
}

namespace {

// What a vocabulary was trained from, beside it (spm.source.json): a leftover
// spm.model is reused only for the same corpus and size.
std::string vocabulary_source(const models::ParallelCorpus& train, int64_t pieces) {
  ByteHash h;  // both sides, line by line, each line ended by a byte no UTF-8 text holds
  auto mix = [&](const std::string& text) {
    h.add(text);
    h.add_byte(0xff);
  };
  for (const auto& line : train.src) mix(line);
  for (const auto& line : train.tgt) mix(line);
  return fmt::format("{{\"pieces\": {}, \"corpus\": \"{:016x}\", \"sentences\": {}}}\n", pieces, h.value(),
                     train.src.size());
}

}  // namespace

void prepare_vocabulary(const models::ParallelCorpus& train, const std::string& prefix, int64_t pieces) {
  const std::string model = prefix + ".model", source_path = prefix + ".source.json";
  const std::string source = vocabulary_source(train, pieces);
  if (std::filesystem::exists(model)) {
    std::ifstream in(source_path);
    const std::string recorded((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (recorded == source) {
      fmt::print("vocabulary: reusing '{}' (trained on this corpus with {} pieces)\n", model, pieces);
      return;
    }
    fmt::print("vocabulary: '{}' was trained {}; training a new one\n", model,
               recorded.empty() ? "by an unknown run" : "on another corpus or size");
  }
  auto t0 = std::chrono::steady_clock::now();
  std::vector<std::string> both = train.src;
  both.insert(both.end(), train.tgt.begin(), train.tgt.end());
  models::Vocabulary::train(both, prefix, pieces);
  write_file(source_path, source);
  fmt::print("vocabulary: trained a joint SentencePiece model of {} pieces in {:.1f} s -> {}\n", pieces,
             std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), model);
}

}  // namespace loom::tools
