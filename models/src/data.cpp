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

void check_utf8(std::string_view line, const std::string& source, int64_t number) {
  const size_t bad = invalid_utf8_at(line);
  LOOM_CHECK(bad == std::string_view::npos, "{}: line {} is not UTF-8 text (byte {} of the line is 0x{:02x})", source,
             number, bad + 1, static_cast<unsigned char>(line[bad]));
}

LineReader::LineReader(std::string path) : path_(std::move(path)), buffer_(size_t{1} << 16) {
  file_ = gzopen(path_.c_str(), "rb");
  LOOM_CHECK(file_ != nullptr, "cannot open '{}': {}", path_, std::strerror(errno));
}

LineReader::~LineReader() { gzclose(static_cast<gzFile>(file_)); }

bool LineReader::refill() {
  const int got = gzread(static_cast<gzFile>(file_), buffer_.data(), static_cast<unsigned>(buffer_.size()));
  // A stream cut short reads as a clean end of file: gzerror tells (Z_BUF_ERROR).
  int error = Z_OK;
  const std::string message = gzerror(static_cast<gzFile>(file_), &error);
  LOOM_CHECK(got >= 0 && (error == Z_OK || error == Z_STREAM_END), "'{}' is corrupt or truncated: {}", path_, message);
  at_ = 0;
  end_ = static_cast<size_t>(got);
  return got > 0;
}

bool LineReader::next(std::string& line) {
  line.clear();
  bool any = false;
  while (at_ < end_ || refill()) {
    any = true;
    const char* start = buffer_.data() + at_;
    const auto* newline = static_cast<const char*>(std::memchr(start, '\n', end_ - at_));
    if (!newline) {
      line.append(start, end_ - at_);
      at_ = end_;
      continue;
    }
    line.append(start, static_cast<size_t>(newline - start));
    at_ += static_cast<size_t>(newline - start) + 1;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    ++lines_;
    if (invalid_utf8_at(line) != std::string_view::npos) check_utf8(line, "'" + path_ + "'", lines_);
    return true;
  }
  if (any && !line.empty()) {  // a last line without its newline
    ++lines_;
    if (invalid_utf8_at(line) != std::string_view::npos) check_utf8(line, "'" + path_ + "'", lines_);
  }
  return any && !line.empty();
}

std::vector<std::string> read_lines(const std::string& path) {
  LineReader reader(path);
  std::vector<std::string> lines;
  for (std::string line; reader.next(line);) lines.push_back(std::move(line));
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

Split read_split(const std::string& dir, const std::string& src, const std::string& tgt, const std::string& name,
                 std::string_view command) {
  Split s{name, corpus_file(dir, name, src, command), corpus_file(dir, name, tgt, command), {}};
  s.corpus = read_parallel(s.src_path, s.tgt_path);
  auto check = [&](const std::vector<std::string>& lines, const std::string& path) {
    LOOM_CHECK(!lines.empty(), "{}: the {} split '{}' is empty", command, name, path);
    LOOM_CHECK(!std::all_of(lines.begin(), lines.end(), is_blank), "{}: the {} split '{}' has {} lines, all blank",
               command, name, path, lines.size());
  };
  check(s.corpus.src, s.src_path);
  check(s.corpus.tgt, s.tgt_path);
  return s;
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

std::vector<EncodedPair> encode(const Vocabulary& vocab, const ParallelCorpus& corpus) {
  std::vector<EncodedPair> pairs(corpus.src.size());
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < pairs.size(); ++i) pairs[i] = {vocab.encode(corpus.src[i]), vocab.encode(corpus.tgt[i])};
  return pairs;
}

std::vector<EncodedPair> keep_fitting(std::vector<EncodedPair> pairs, const Split& split, int64_t max_len) {
  const size_t total = pairs.size();
  std::erase_if(pairs, [&](const EncodedPair& p) { return !fits(p, max_len); });
  const size_t dropped = total - pairs.size();
  LOOM_CHECK(!pairs.empty(), "train: --max-len {} drops all {} pairs of the {} split ('{}', '{}')", max_len, total,
             split.name, split.src_path, split.tgt_path);
  if (dropped)
    fmt::print("{}: dropped {} of {} pairs longer than --max-len {} pieces\n", split.name, dropped, total, max_len);
  return pairs;
}

// ---- batching ----
bool fits(const EncodedPair& pair, int64_t max_len) {
  return static_cast<int64_t>(std::max(pair.src.size(), pair.tgt.size())) + 1 <= max_len;
}

int64_t count_fitting(std::span<const PairLength> lengths, int64_t max_len) {
  return std::count_if(lengths.begin(), lengths.end(), [&](PairLength n) { return fits(n, max_len); });
}

std::vector<uint32_t> fitting_pairs(std::span<const PairLength> lengths, int64_t max_len) {
  std::vector<uint32_t> kept;
  for (size_t i = 0; i < lengths.size(); ++i)
    if (fits(lengths[i], max_len)) kept.push_back(static_cast<uint32_t>(i));
  return kept;
}

// ---- the pairs batching reads ----
void PairHash::add(std::span<const int64_t> src, std::span<const int64_t> tgt) {
  for (auto side : {src, tgt}) {
    h_.add_u64(side.size());
    for (int64_t id : side) h_.add_u64(static_cast<uint64_t>(id));
  }
}

uint64_t fingerprint(const std::vector<EncodedPair>& pairs) {
  PairHash h;
  for (const auto& p : pairs) h.add(p.src, p.tgt);
  return h.value();
}

uint64_t fingerprint(const PairSource& pairs, std::span<const uint32_t> which) {
  PairHash h;
  std::vector<int64_t> src, tgt;
  for (uint32_t i : which) {
    const PairLength n = pairs.lengths()[i];
    src.resize(n.src);
    tgt.resize(n.tgt);
    pairs.read_pair(i, src.data(), tgt.data());
    h.add(src, tgt);
  }
  return h.value();
}

PairsInMemory::PairsInMemory(std::vector<EncodedPair> pairs) : pairs_(std::move(pairs)) {
  LOOM_CHECK(pairs_.size() < (size_t{1} << 32), "PairsInMemory: {} pairs, more than batching indexes", pairs_.size());
  lengths_.reserve(pairs_.size());
  for (size_t i = 0; i < pairs_.size(); ++i) {
    const auto longest = static_cast<int64_t>(std::max(pairs_[i].src.size(), pairs_[i].tgt.size()));
    LOOM_CHECK(longest <= kMaxPieces,
               "PairsInMemory: pair {} has a side of {} pieces, more than the {} a pair may have", i, longest,
               kMaxPieces);
    lengths_.push_back({static_cast<uint16_t>(pairs_[i].src.size()), static_cast<uint16_t>(pairs_[i].tgt.size())});
  }
  fingerprint_ = models::fingerprint(pairs_);
}

void PairsInMemory::read_pair(int64_t i, int64_t* src, int64_t* tgt) const {
  const EncodedPair& p = pairs_.at(static_cast<size_t>(i));
  std::copy(p.src.begin(), p.src.end(), src);
  std::copy(p.tgt.begin(), p.tgt.end(), tgt);
}

namespace {
// Fisher-Yates on Philox uniforms: the same draws for a generator's seed and offset.
template <typename T>
void shuffle(std::vector<T>& items, Generator& gen) {
  if (items.size() < 2) return;
  auto u = rand({static_cast<int64_t>(items.size())}, {DType::f64}, gen).to_vector<double>();
  for (size_t i = items.size() - 1; i > 0; --i) std::swap(items[i], items[static_cast<size_t>(u[i] * (i + 1))]);
}

// A pair and its lengths, carried together through the sort so that no pass after
// the first reads `lengths` out of order (at millions of pairs, cache misses were
// most of an epoch's plan).
struct SortedPair {
  uint32_t pair;
  PairLength length;
};

// The pairs of `order` that fit, stably sorted by (source, target) length: a counting
// sort by target, then by source (linear in the pairs; every side is below max_len).
std::vector<SortedPair> sort_by_length(std::span<const PairLength> lengths, const std::vector<uint32_t>& order,
                                       int64_t max_len) {
  std::vector<SortedPair> items, sorted;
  items.reserve(order.size());
  for (uint32_t i : order)
    if (fits(lengths[i], max_len)) items.push_back({i, lengths[i]});
  sorted.resize(items.size());
  std::vector<size_t> at(static_cast<size_t>(max_len) + 1);
  for (auto side : {&PairLength::tgt, &PairLength::src}) {
    std::fill(at.begin(), at.end(), 0);
    for (const SortedPair& p : items) ++at[p.length.*side + 1];
    for (size_t k = 1; k < at.size(); ++k) at[k] += at[k - 1];
    for (const SortedPair& p : items) sorted[at[p.length.*side]++] = p;
    std::swap(items, sorted);
  }
  return items;
}

// The pairs of `order` that fit, by length (source, then target), split into groups of
// at most max_tokens padded tokens (plan.order left empty). Pairs of equal lengths keep
// their order in `order`.
BatchPlan group_by_length(std::span<const PairLength> lengths, std::vector<uint32_t> order, int64_t max_tokens,
                          int64_t max_len) {
  const std::vector<SortedPair> sorted = sort_by_length(lengths, order, max_len);
  BatchPlan plan{.pairs = std::move(order), .starts = {}, .order = {}};  // its buffer reused
  plan.pairs.resize(sorted.size());
  int64_t longest = 0, in_group = 0;
  for (size_t k = 0; k < sorted.size(); ++k) {
    plan.pairs[k] = sorted[k].pair;
    const int64_t len = std::max<int64_t>(sorted[k].length.src, sorted[k].length.tgt) + 1;
    if (plan.starts.empty() || (in_group + 1) * std::max(longest, len) > max_tokens) {
      plan.starts.push_back(k);
      longest = in_group = 0;
    }
    ++in_group;
    longest = std::max(longest, len);
  }
  plan.starts.push_back(plan.pairs.size());
  return plan;
}

std::vector<uint32_t> corpus_order(size_t count) {
  std::vector<uint32_t> order(count);
  std::iota(order.begin(), order.end(), uint32_t{0});
  return order;
}
}  // namespace

BatchPlan plan_batches(std::span<const PairLength> lengths, std::vector<uint32_t> candidates, int64_t max_tokens,
                       int64_t max_len, Generator& gen, Grouping grouping) {
  LOOM_CHECK(max_tokens > max_len, "make_batches: max_tokens {} must exceed max_len {}", max_tokens, max_len);
  // Regrouped: pairs of equal lengths meet in a drawn order, so batch boundaries and
  // companions change from one call to the next.
  if (grouping == Grouping::drawn) shuffle(candidates, gen);
  BatchPlan plan = group_by_length(lengths, std::move(candidates), max_tokens, max_len);
  plan.order = corpus_order(plan.starts.size() - 1);
  shuffle(plan.order, gen);  // the batches' order (not within them)
  return plan;
}

int64_t count_batches(std::span<const PairLength> lengths, std::vector<uint32_t> candidates, int64_t max_tokens,
                      int64_t max_len) {
  return static_cast<int64_t>(group_by_length(lengths, std::move(candidates), max_tokens, max_len).starts.size() - 1);
}

Batch count_tokens(std::span<const PairLength> lengths, std::span<const uint32_t> group) {
  Batch batch;
  for (uint32_t i : group) {
    batch.src_tokens += lengths[i].src + 1;
    batch.tgt_tokens += lengths[i].tgt + 1;
  }
  return batch;
}

Batch make_batch(const PairSource& pairs, std::span<const uint32_t> group) {
  const auto lengths = pairs.lengths();
  const auto b = static_cast<int64_t>(group.size());
  int64_t S = 0, T = 0;
  for (uint32_t i : group) S = std::max<int64_t>(S, lengths[i].src + 1), T = std::max<int64_t>(T, lengths[i].tgt + 1);
  std::vector<int64_t> src(b * S, Vocabulary::kPad), tgt_in(b * T, Vocabulary::kPad), tgt_out(b * T, Vocabulary::kPad);
  for (int64_t r = 0; r < b; ++r) {
    const PairLength n = lengths[group[r]];
    // The target's pieces go after bos in tgt_in; tgt_out is the same pieces one place earlier.
    pairs.read_pair(group[r], src.data() + r * S, tgt_in.data() + r * T + 1);
    src[r * S + n.src] = Vocabulary::kEos;
    tgt_in[r * T] = Vocabulary::kBos;
    std::copy_n(tgt_in.begin() + r * T + 1, n.tgt, tgt_out.begin() + r * T);
    tgt_out[r * T + n.tgt] = Vocabulary::kEos;
  }
  Batch batch = count_tokens(lengths, group);
  batch.src = from_vector(src, {b, S}, {DType::i64});
  batch.tgt_in = from_vector(tgt_in, {b, T}, {DType::i64});
  batch.tgt_out = from_vector(tgt_out, {b, T}, {DType::i64});
  return batch;
}

Batch padded_to(const Batch& b, int64_t multiple) {
  LOOM_CHECK(multiple >= 1, "padded_to: the multiple must be at least 1, got {}", multiple);
  if (multiple == 1) return b;
  auto up = [multiple](int64_t n) { return (n + multiple - 1) / multiple * multiple; };
  const int64_t rows = up(b.src.shape()[0]);
  auto grow = [&](const Tensor& t) {
    const int64_t old_rows = t.shape()[0], old_cols = t.shape()[1], cols = up(old_cols);
    const std::vector<int64_t> ids = t.to_vector<int64_t>();
    std::vector<int64_t> out(static_cast<size_t>(rows * cols), Vocabulary::kPad);
    for (int64_t r = 0; r < old_rows; ++r) std::copy_n(ids.begin() + r * old_cols, old_cols, out.begin() + r * cols);
    return from_vector(out, {rows, cols}, {DType::i64});
  };
  return {grow(b.src), grow(b.tgt_in), grow(b.tgt_out), b.src_tokens, b.tgt_tokens};
}

int64_t count_batches(const std::vector<EncodedPair>& pairs, int64_t max_tokens, int64_t max_len) {
  const PairsInMemory source(pairs);
  return count_batches(source.lengths(), corpus_order(pairs.size()), max_tokens, max_len);
}

std::vector<Batch> make_batches(const std::vector<EncodedPair>& pairs, int64_t max_tokens, int64_t max_len,
                                Generator& gen, Grouping grouping) {
  const PairsInMemory source(pairs);
  std::vector<Batch> batches;
  const BatchPlan plan = plan_batches(source.lengths(), corpus_order(pairs.size()), max_tokens, max_len, gen, grouping);
  for (size_t b = 0; b < plan.size(); ++b) batches.push_back(make_batch(source, plan[b]));
  return batches;
}

}  // namespace loom::models
