#include "loom/models/data.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>
#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <numeric>

#include "loom/atomic_file.h"

// Declared in SentencePiece's common.h, which Debian does not install; exported by libsentencepiece.
namespace sentencepiece::logging {
void SetMinLogLevel(int level);
}
#include "loom/error.h"

namespace loom::models {

std::vector<std::string> read_lines(const std::string& path) {
  gzFile file = gzopen(path.c_str(), "rb");
  LOOM_CHECK(file != nullptr, "read_lines: cannot open '{}': {}", path, std::strerror(errno));
  std::vector<std::string> lines;
  std::string current;
  char buffer[1 << 16];
  int got;
  while ((got = gzread(file, buffer, sizeof buffer)) > 0) {
    for (int i = 0; i < got; ++i) {
      if (buffer[i] == '\n') {
        if (!current.empty() && current.back() == '\r') current.pop_back();
        lines.push_back(std::move(current));
        current.clear();
      } else {
        current += buffer[i];
      }
    }
  }
  // A stream cut short reads as a clean end of file: gzerror tells (Z_BUF_ERROR).
  int error = Z_OK;
  const std::string message = gzerror(file, &error);
  gzclose(file);
  LOOM_CHECK(got >= 0 && (error == Z_OK || error == Z_STREAM_END), "read_lines: '{}' is corrupt or truncated: {}", path,
             message);
  if (!current.empty()) lines.push_back(std::move(current));
  return lines;
}

std::string corpus_file(const std::string& dir, const std::string& split, const std::string& lang,
                        std::string_view command) {
  const std::string plain = dir + "/" + split + "." + lang;
  if (std::filesystem::exists(plain)) return plain;
  LOOM_CHECK(std::filesystem::exists(plain + ".gz"), "{}: no corpus file '{}' or '{}.gz'", command, plain, plain);
  return plain + ".gz";
}

ParallelCorpus read_parallel(const std::string& src_path, const std::string& tgt_path) {
  ParallelCorpus corpus{read_lines(src_path), read_lines(tgt_path)};
  LOOM_CHECK(corpus.src.size() == corpus.tgt.size(),
             "read_parallel: '{}' has {} lines but '{}' has {}: the sides are not aligned", src_path, corpus.src.size(),
             tgt_path, corpus.tgt.size());
  return corpus;
}

// ---- vocabulary ----
bool is_blank(const std::string& line) { return line.find_first_not_of(" \t\r\f\v") == std::string::npos; }

void Vocabulary::train(const std::vector<std::string>& sentences, const std::string& prefix, int64_t size) {
  LOOM_CHECK(!std::all_of(sentences.begin(), sentences.end(), is_blank),
             "Vocabulary::train: no text to train on ({} sentences, all blank)", sentences.size());
  LOOM_CHECK(size > 4, "Vocabulary::train: a vocabulary needs more than the 4 special ids, got {}", size);
  // From memory, one sentence per iteration; fixed special ids; no random
  // sampling of the input (deterministic).
  struct Sentences : sentencepiece::SentenceIterator {
    const std::vector<std::string>& lines;
    size_t i = 0;
    explicit Sentences(const std::vector<std::string>& l) : lines(l) {}
    bool done() const override { return i >= lines.size(); }
    void Next() override { ++i; }
    const std::string& value() const override { return lines[i]; }
    sentencepiece::util::Status status() const override { return {}; }
  } iterator(sentences);
  // SentencePiece returns the model as bytes (no files of its own, no temporary
  // name inside it: two runs' vocabularies are byte-identical when their pieces
  // are); loom writes <prefix>.model and .vocab through the atomic path.
  const std::string args = "--vocab_size=" + std::to_string(size) +
                           " --model_type=unigram --character_coverage=1.0 --pad_id=0 --unk_id=1 --bos_id=2"
                           " --eos_id=3 --input_sentence_size=0 --shuffle_input_sentence=false"
                           " --num_threads=1 --minloglevel=2";
  sentencepiece::logging::SetMinLogLevel(2);  // before Train: its "Running command" line is INFO
  std::string model;
  const auto status = sentencepiece::SentencePieceTrainer::Train(args, &iterator, &model);
  LOOM_CHECK(status.ok(), "Vocabulary::train: SentencePiece failed for '{}.model': {}{}", prefix, status.ToString(),
             status.ToString().find("character_coverage") != std::string::npos
                 ? " (loom trains with full character coverage; a corpus with fewer distinct characters than "
                   "--vocab asks for a smaller --vocab)"
                 : "");
  sentencepiece::SentencePieceProcessor processor;
  LOOM_CHECK(processor.LoadFromSerializedProto(model).ok(),
             "Vocabulary::train: SentencePiece's model for '{}' does "
             "not load",
             prefix);
  write_file(prefix + ".model", model);  // whole or absent (the .vocab beside it is for people to read)
  std::string pieces;                    // <prefix>.vocab: piece TAB score per id, as SentencePiece writes it
  for (int id = 0; id < processor.GetPieceSize(); ++id)
    pieces += fmt::format("{}\t{}\n", processor.IdToPiece(id), processor.GetScore(id));
  write_file(prefix + ".vocab", pieces);
}

Vocabulary::Vocabulary(const std::string& model_path)
    : processor_(std::make_unique<sentencepiece::SentencePieceProcessor>()), path_(model_path) {
  const auto status = processor_->Load(model_path);
  LOOM_CHECK(status.ok(), "Vocabulary: cannot load the SentencePiece model '{}': {}", model_path, status.ToString());
  LOOM_CHECK(processor_->pad_id() == kPad && processor_->unk_id() == kUnk && processor_->bos_id() == kBos &&
                 processor_->eos_id() == kEos,
             "Vocabulary: '{}' was not trained with loom's special ids (pad 0, unk 1, bos 2, eos 3)", model_path);
}

Vocabulary::~Vocabulary() = default;

std::vector<int64_t> Vocabulary::encode(const std::string& text) const {
  std::vector<int> ids;
  const auto status = processor_->Encode(text, &ids);
  LOOM_CHECK(status.ok(), "Vocabulary: encoding failed: {}", status.ToString());
  return {ids.begin(), ids.end()};
}

std::string Vocabulary::decode(const std::vector<int64_t>& ids) const {
  std::vector<int> pieces;
  for (int64_t id : ids) {
    if (id == kEos) break;
    if (id == kPad || id == kBos) continue;
    LOOM_CHECK(id >= 0 && id < size(), "Vocabulary: id {} is out of range for a vocabulary of {}", id, size());
    pieces.push_back(static_cast<int>(id));
  }
  std::string text;
  const auto status = processor_->Decode(pieces, &text);
  LOOM_CHECK(status.ok(), "Vocabulary: decoding failed: {}", status.ToString());
  return text;
}

std::string Vocabulary::piece(int64_t id) const {
  LOOM_CHECK(id >= 0 && id < size(), "Vocabulary: id {} is out of range for a vocabulary of {}", id, size());
  return processor_->IdToPiece(static_cast<int>(id));
}

int64_t Vocabulary::size() const { return processor_->GetPieceSize(); }

// ---- batching ----
bool fits(const EncodedPair& pair, int64_t max_len) {
  return static_cast<int64_t>(std::max(pair.src.size(), pair.tgt.size())) + 1 <= max_len;
}

namespace {
// Fisher-Yates on Philox uniforms: the same draws for a generator's seed and offset.
template <typename T>
void shuffle(std::vector<T>& items, Generator& gen) {
  if (items.size() < 2) return;
  auto u = rand({static_cast<int64_t>(items.size())}, {DType::f64}, gen).to_vector<double>();
  for (size_t i = items.size() - 1; i > 0; --i) std::swap(items[i], items[static_cast<size_t>(u[i] * (i + 1))]);
}

// The pairs that fit, by length (source, then target), split into groups of at most
// max_tokens padded tokens. Pairs of equal lengths keep their order in `order`.
std::vector<std::vector<size_t>> group_by_length(const std::vector<EncodedPair>& pairs, std::vector<size_t> order,
                                                 int64_t max_tokens, int64_t max_len) {
  std::erase_if(order, [&](size_t i) { return !fits(pairs[i], max_len); });
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return std::pair(pairs[a].src.size(), pairs[a].tgt.size()) < std::pair(pairs[b].src.size(), pairs[b].tgt.size());
  });
  std::vector<std::vector<size_t>> groups;
  int64_t longest = 0;
  for (size_t i : order) {
    const int64_t len = static_cast<int64_t>(std::max(pairs[i].src.size(), pairs[i].tgt.size())) + 1;
    if (groups.empty() || static_cast<int64_t>(groups.back().size() + 1) * std::max(longest, len) > max_tokens) {
      groups.emplace_back();
      longest = 0;
    }
    groups.back().push_back(i);
    longest = std::max(longest, len);
  }
  return groups;
}

std::vector<size_t> corpus_order(size_t count) {
  std::vector<size_t> order(count);
  std::iota(order.begin(), order.end(), size_t{0});
  return order;
}
}  // namespace

int64_t count_batches(const std::vector<EncodedPair>& pairs, int64_t max_tokens, int64_t max_len) {
  return static_cast<int64_t>(group_by_length(pairs, corpus_order(pairs.size()), max_tokens, max_len).size());
}

std::vector<Batch> make_batches(const std::vector<EncodedPair>& pairs, int64_t max_tokens, int64_t max_len,
                                Generator& gen, Grouping grouping) {
  LOOM_CHECK(max_tokens > max_len, "make_batches: max_tokens {} must exceed max_len {}", max_tokens, max_len);
  std::vector<size_t> order = corpus_order(pairs.size());
  // Regrouped: pairs of equal lengths meet in a drawn order, so batch boundaries and
  // companions change from one call to the next.
  if (grouping == Grouping::drawn) shuffle(order, gen);
  std::vector<std::vector<size_t>> groups = group_by_length(pairs, std::move(order), max_tokens, max_len);
  shuffle(groups, gen);  // the batches' order (not within them)
  std::vector<Batch> batches;
  for (const auto& group : groups) {
    const int64_t b = static_cast<int64_t>(group.size());
    size_t s_len = 0, t_len = 0;
    for (size_t i : group)
      s_len = std::max(s_len, pairs[i].src.size() + 1), t_len = std::max(t_len, pairs[i].tgt.size() + 1);
    std::vector<int64_t> src(b * s_len, Vocabulary::kPad), tgt_in(b * t_len, Vocabulary::kPad),
        tgt_out(b * t_len, Vocabulary::kPad);
    Batch batch;
    for (int64_t r = 0; r < b; ++r) {
      const EncodedPair& p = pairs[group[r]];
      std::copy(p.src.begin(), p.src.end(), src.begin() + r * s_len);
      src[r * s_len + p.src.size()] = Vocabulary::kEos;
      tgt_in[r * t_len] = Vocabulary::kBos;
      std::copy(p.tgt.begin(), p.tgt.end(), tgt_in.begin() + r * t_len + 1);
      std::copy(p.tgt.begin(), p.tgt.end(), tgt_out.begin() + r * t_len);
      tgt_out[r * t_len + p.tgt.size()] = Vocabulary::kEos;
      batch.src_tokens += static_cast<int64_t>(p.src.size()) + 1;
      batch.tgt_tokens += static_cast<int64_t>(p.tgt.size()) + 1;
    }
    const int64_t S = static_cast<int64_t>(s_len), T = static_cast<int64_t>(t_len);
    batch.src = from_vector(src, {b, S}, {DType::i64});
    batch.tgt_in = from_vector(tgt_in, {b, T}, {DType::i64});
    batch.tgt_out = from_vector(tgt_out, {b, T}, {DType::i64});
    batches.push_back(std::move(batch));
  }
  return batches;
}

}  // namespace loom::models
