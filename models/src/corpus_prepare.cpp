// Writing a corpus store (loom/models/corpus_store.h): read -> vocabulary ->
// encode -> store, streaming the corpus twice (a sample for SentencePiece, then
// every pair in chunks), so memory is the sample's plus a chunk's at any size.
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>
#include <random>
#include <unordered_set>

#include "loom/atomic_file.h"
#include "loom/error.h"
#include "loom/models/corpus_store.h"

namespace loom::models {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

constexpr size_t kChunkPairs = 1 << 14;  // pairs encoded together: the bounded buffer

struct Sources {
  std::string src, tgt;  // train.<src>[.gz], train.<tgt>[.gz]
};

// What a store was prepared from, as its manifest keeps it: the same text means the same store.
std::string arguments_of(const PrepareOptions& o, const Sources& files) {
  auto file = [](const std::string& path) {
    const auto time = fs::last_write_time(path).time_since_epoch();
    return json{{"path", path},
                {"bytes", fs::file_size(path)},
                {"modified", std::chrono::duration_cast<std::chrono::nanoseconds>(time).count()}};
  };
  return json{{"data", o.data},
              {"src", o.src},
              {"tgt", o.tgt},
              {"files", {file(files.src), file(files.tgt)}},
              {"vocab", o.vocabulary.empty() ? o.vocab : 0},
              {"vocab_sample", o.vocabulary.empty() ? o.vocab_sample : 0},
              {"vocabulary", o.vocabulary},
              {"max_pieces", o.max_pieces},
              {"max_ratio", o.max_ratio},
              {"drop_empty", o.drop_empty},
              {"drop_duplicates", o.drop_duplicates}}
      .dump();
}

Sources train_files(const PrepareOptions& o) {
  return {corpus_file(o.data, "train", o.src, "data prepare"), corpus_file(o.data, "train", o.tgt, "data prepare")};
}

// Both sides in step; the first to end early is an error naming both files and their counts.
class PairReader {
 public:
  explicit PairReader(const Sources& files) : src_(files.src), tgt_(files.tgt) {}
  bool next(std::string& src, std::string& tgt) {
    const bool a = src_.next(src), b = tgt_.next(tgt);
    if (a && b) return true;
    if (a || b) {  // count the rest of the longer side for the message
      LineReader& longer = a ? src_ : tgt_;
      for (std::string rest; longer.next(rest);) {
      }
      fail("data prepare: '{}' has {} lines but '{}' has {}: the sides are not aligned", src_.path(), src_.lines_read(),
           tgt_.path(), tgt_.lines_read());
    }
    return false;
  }
  int64_t pairs() const { return src_.lines_read(); }

 private:
  LineReader src_, tgt_;
};

// Counted while a pass reads: an empty or all-blank side is refused by name.
struct SideCheck {
  int64_t text[2] = {0, 0};
  void add(const std::string& src, const std::string& tgt) {
    text[0] += !is_blank(src);
    text[1] += !is_blank(tgt);
  }
  void check(const Sources& files, int64_t pairs) const {
    LOOM_CHECK(pairs > 0, "data prepare: the train split '{}' is empty", files.src);
    const std::string* paths[2] = {&files.src, &files.tgt};
    for (int side = 0; side < 2; ++side)
      LOOM_CHECK(text[side] > 0, "data prepare: the train split '{}' has {} lines, all blank", *paths[side], pairs);
  }
};

// Pass 1: both sides of at most vocab_sample / 2 pairs (reservoir sampling with a
// fixed seed: the same sample on any machine), sources then targets in corpus
// order, as SentencePiece trains on them. A corpus within the sample is all of it.
std::vector<std::string> vocabulary_sample(const PrepareOptions& o, const Sources& files, int64_t& pairs) {
  struct Kept {
    int64_t index;
    std::string src, tgt;
  };
  const auto capacity = static_cast<size_t>(std::max<int64_t>(1, o.vocab_sample / 2));
  std::vector<Kept> kept;
  std::mt19937_64 draw(1);  // its outputs are fixed by the standard
  PairReader reader(files);
  SideCheck sides;
  std::string src, tgt;
  for (int64_t i = 0; reader.next(src, tgt); ++i) {
    sides.add(src, tgt);
    if (kept.size() < capacity) {
      kept.push_back({i, src, tgt});
    } else if (const uint64_t j = draw() % static_cast<uint64_t>(i + 1); j < capacity) {
      kept[j] = {i, src, tgt};
    }
  }
  pairs = reader.pairs();
  sides.check(files, pairs);
  std::sort(kept.begin(), kept.end(), [](const Kept& a, const Kept& b) { return a.index < b.index; });
  std::vector<std::string> sentences;
  sentences.reserve(2 * kept.size());
  for (Kept& k : kept) sentences.push_back(std::move(k.src));
  for (Kept& k : kept) sentences.push_back(std::move(k.tgt));
  return sentences;
}

// A file of the store being written, through a buffer; errors name it.
class Output {
 public:
  explicit Output(std::string path) : path_(std::move(path)), file_(std::fopen(path_.c_str(), "wb")) {
    LOOM_CHECK(file_ != nullptr, "data prepare: cannot create '{}': {}", path_, std::strerror(errno));
  }
  ~Output() {
    if (file_) std::fclose(file_);
  }
  void write(const void* bytes, size_t size) {
    LOOM_CHECK(std::fwrite(bytes, 1, size, file_) == size, "data prepare: writing '{}' failed (disk full?): {}", path_,
               std::strerror(errno));
  }
  void close() {
    const bool ok = std::fflush(file_) == 0;
    const int error = errno;
    std::fclose(file_);
    file_ = nullptr;
    LOOM_CHECK(ok, "data prepare: writing '{}' failed (disk full?): {}", path_, std::strerror(error));
  }

 private:
  std::string path_;
  std::FILE* file_;
};

// What pass 2 keeps of each pair, and why not.
struct Cleaner {
  const PrepareOptions& o;
  std::unordered_set<uint64_t> seen;  // drop_duplicates: each kept pair's text digest
  StoreManifest& counts;

  bool keep(const std::string& src, const std::string& tgt, size_t src_pieces, size_t tgt_pieces) {
    if (o.drop_empty && (is_blank(src) || is_blank(tgt))) return ++counts.dropped_empty, false;
    const auto longer = static_cast<double>(std::max(src_pieces, tgt_pieces));
    if (o.max_pieces > 0 && longer > static_cast<double>(o.max_pieces)) return ++counts.dropped_long, false;
    const auto shorter = static_cast<double>(std::max<size_t>(1, std::min(src_pieces, tgt_pieces)));
    if (o.max_ratio > 0 && longer / shorter > o.max_ratio) return ++counts.dropped_ratio, false;
    if (o.drop_duplicates) {
      ByteHash h;
      h.add(src);
      h.add_byte(0xff);  // no UTF-8 text holds it: "a b" + "c" differs from "a" + "b c"
      h.add(tgt);
      if (!seen.insert(h.value()).second) return ++counts.dropped_duplicates, false;
    }
    return true;
  }
};

// Pass 2: every pair encoded (a chunk at a time, on every thread) and written.
void encode_pairs(const PrepareOptions& o, const Sources& files, const Vocabulary& vocab, const std::string& folder,
                  int64_t total, StoreManifest& m) {
  Output tokens(folder + "/train.tokens"), lengths(folder + "/train.lengths");
  Cleaner cleaner{o, {}, m};
  PairHash pairs_hash;
  ByteHash lengths_hash;
  PairReader reader(files);
  SideCheck sides;
  std::vector<std::string> src(kChunkPairs), tgt(kChunkPairs);
  std::vector<std::vector<int64_t>> src_ids(kChunkPairs), tgt_ids(kChunkPairs);
  std::vector<uint16_t> narrow;
  std::vector<int32_t> wide;
  for (;;) {
    size_t n = 0;
    while (n < kChunkPairs && reader.next(src[n], tgt[n])) sides.add(src[n], tgt[n]), ++n;
    if (n == 0) break;
    const int64_t first_line = reader.pairs() - static_cast<int64_t>(n) + 1;
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; ++i) {
      src_ids[i] = vocab.encode(src[i]);
      tgt_ids[i] = vocab.encode(tgt[i]);
    }
    for (size_t i = 0; i < n; ++i) {
      const size_t s = src_ids[i].size(), t = tgt_ids[i].size();
      if (!cleaner.keep(src[i], tgt[i], s, t)) continue;
      if (std::max(s, t) > static_cast<size_t>(kMaxPieces)) {
        const bool source = s >= t;
        fail(
            "data prepare: line {} of '{}' is {} pieces, more than the {} a store holds per side: drop such pairs "
            "with --max-pieces N (the WMT recipes drop pairs over 250 words), or remove the line",
            first_line + static_cast<int64_t>(i), source ? files.src : files.tgt, std::max(s, t), kMaxPieces);
      }
      pairs_hash.add(src_ids[i], tgt_ids[i]);
      const PairLength n_pieces{static_cast<uint16_t>(s), static_cast<uint16_t>(t)};
      lengths_hash.add({reinterpret_cast<const char*>(&n_pieces), sizeof n_pieces});  // the file's bytes
      lengths.write(&n_pieces, sizeof n_pieces);
      for (const auto* ids : {&src_ids[i], &tgt_ids[i]}) {
        if (m.id_bytes == 2) {
          narrow.assign(ids->begin(), ids->end());
          tokens.write(narrow.data(), narrow.size() * 2);
        } else {
          wide.assign(ids->begin(), ids->end());
          tokens.write(wide.data(), wide.size() * 4);
        }
      }
      ++m.pairs;
      m.tokens += static_cast<int64_t>(s + t);
    }
    if (o.progress) o.progress(reader.pairs(), total);
  }
  m.read = reader.pairs();
  sides.check(files, m.read);
  LOOM_CHECK(m.pairs > 0, "data prepare: cleaning dropped all {} pairs of '{}' and '{}'", m.read, files.src, files.tgt);
  LOOM_CHECK(m.pairs < (int64_t{1} << 32), "data prepare: {} pairs, more than a store indexes (2^32)", m.pairs);
  tokens.close();
  lengths.close();
  m.fingerprint = pairs_hash.value();
  m.lengths_digest = lengths_hash.value();
}

void copy_into(const std::string& from, const std::string& folder) {
  fs::copy_file(from, fs::path(folder) / fs::path(from).filename(), fs::copy_options::overwrite_existing);
}

}  // namespace

bool store_matches(const std::string& dir, const PrepareOptions& options) {
  if (!is_store(dir)) return false;
  try {
    return read_manifest(dir).arguments == arguments_of(options, train_files(options));
  } catch (const Error&) {
    return false;  // a damaged store is prepared again
  }
}

StoreManifest prepare_store(const PrepareOptions& o) {
  LOOM_CHECK(!o.out.empty(), "data prepare: --out (the store's folder) is required");
  LOOM_CHECK(!fs::exists(o.out), "data prepare: '{}' exists; prepare into a new folder (or remove it)", o.out);
  LOOM_CHECK(o.vocabulary.empty() || fs::exists(o.vocabulary), "data prepare: --vocabulary '{}' does not exist",
             o.vocabulary);
  const Sources files = train_files(o);
  // The validation split is checked first (cheap): a bad one is refused before SentencePiece runs.
  std::optional<Split> val;
  const bool has_val = fs::exists(o.data + "/val." + o.src) || fs::exists(o.data + "/val." + o.src + ".gz");
  if (has_val) val = read_split(o.data, o.src, o.tgt, "val", "data prepare");
  auto say = [&](const std::string& line) {
    if (o.message) o.message(line);
  };
  if (!fs::path(o.out).parent_path().empty()) fs::create_directories(fs::path(o.out).parent_path());
  const fs::path target(o.out);  // <out>.tmp.<pid> folders whose writer died
  remove_dead_temporaries(target.parent_path().empty() ? "." : target.parent_path().string(),
                          target.filename().string());
  const std::string folder = temporary_path(o.out);
  fs::create_directories(folder);
  try {
    StoreManifest m;
    m.src = o.src;
    m.tgt = o.tgt;
    m.arguments = arguments_of(o, files);
    int64_t total = 0;  // known after the sample's pass
    const auto start = std::chrono::steady_clock::now();
    auto seconds = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
    if (o.vocabulary.empty()) {
      const std::vector<std::string> sample = vocabulary_sample(o, files, total);
      m.sampled_sentences = static_cast<int64_t>(sample.size());
      Vocabulary::train(sample, folder + "/spm", o.vocab);
      say(
          fmt::format("vocabulary: a joint SentencePiece model of {} pieces trained on {} sentences ({} of {} pairs) "
                      "in {:.1f} s",
                      o.vocab, sample.size(), sample.size() / 2, total, seconds()));
    } else {
      fs::copy_file(o.vocabulary, folder + "/spm.model");
      const std::string pieces = fs::path(o.vocabulary).replace_extension(".vocab").string();
      if (fs::exists(pieces)) fs::copy_file(pieces, folder + "/spm.vocab");
      say(fmt::format("vocabulary: '{}' (given)", o.vocabulary));
    }
    const Vocabulary vocab(folder + "/spm.model");
    m.pieces = vocab.size();
    m.id_bytes = vocab.size() <= 65536 ? 2 : 4;
    encode_pairs(o, files, vocab, folder, total, m);
    const int64_t dropped = m.dropped_long + m.dropped_ratio + m.dropped_empty + m.dropped_duplicates;
    if (dropped > 0)
      say(
          fmt::format("cleaning: dropped {} of {} pairs ({} with a side over --max-pieces, {} over --max-ratio, {} "
                      "with an empty side, {} duplicates)",
                      dropped, m.read, m.dropped_long, m.dropped_ratio, m.dropped_empty, m.dropped_duplicates));
    if (val) {  // it travels with the store, as it was (small): `loom train --data STORE` reads it
      copy_into(val->src_path, folder);
      copy_into(val->tgt_path, folder);
    } else {
      say(fmt::format("no val split in '{}': give the store one (val.{} and val.{}) before `loom train` uses it",
                      o.data, o.src, o.tgt));
    }
    write_file(folder + "/manifest.json", m.to_json());
    commit_folder(folder, o.out);
    say(fmt::format("store: {} pairs, {} tokens ({}-byte ids) in {:.1f} s -> {}", m.pairs, m.tokens, m.id_bytes,
                    seconds(), o.out));
    return m;
  } catch (...) {
    std::error_code ignored;
    fs::remove_all(folder, ignored);
    throw;
  }
}

std::shared_ptr<const CorpusStore> prepare_run_corpus(const std::string& out, PrepareOptions how, bool resuming) {
  auto say = [&](const std::string& line) {
    if (how.message) how.message(line);
  };
  std::string store = how.data;
  if (!is_store(how.data)) {
    store = (fs::path(out) / "corpus").string();
    if (resuming && !is_store(store)) {
      how.vocabulary = (fs::path(out) / "spm.model").string();
      LOOM_CHECK(fs::exists(how.vocabulary), "train: --resume '{}': the vocabulary '{}' is missing", out,
                 how.vocabulary);
      say(fmt::format("corpus: the run has no prepared store; preparing '{}' from '{}' with its vocabulary", store,
                      how.data));
    }
    if (!resuming && is_store(store) && store_matches(store, how)) {
      say(fmt::format("corpus: reusing '{}' (prepared from this corpus with these arguments)", store));
    } else if (!resuming || !is_store(store)) {
      std::error_code ignored;
      if (fs::exists(store)) say(fmt::format("corpus: '{}' was prepared otherwise; preparing it again", store));
      fs::remove_all(store, ignored);
      how.out = store;
      prepare_store(how);
    }
  }
  auto opened = std::make_shared<const CorpusStore>(store);  // checked before the run names its vocabulary
  if (!resuming) {
    for (const char* name : {"spm.model", "spm.vocab"}) {
      const fs::path from = fs::path(store) / name;
      if (fs::exists(from)) copy_file(from.string(), (fs::path(out) / name).string());
    }
  }
  return opened;
}

}  // namespace loom::models
