// A corpus store opened: the manifest read and checked against its files, the
// lengths and tokens mapped. Writing one is corpus_prepare.cpp.
#include "loom/models/corpus_store.h"

#include <nlohmann/json.hpp>

#include <cstring>
#include <filesystem>

#include "loom/atomic_file.h"
#include "loom/error.h"

namespace loom::models {

namespace fs = std::filesystem;
using json = nlohmann::json;

static_assert(sizeof(PairLength) == 4, "train.lengths holds a pair's lengths as 2 x uint16");

std::string StoreManifest::to_json() const {
  const json j = {{"format", kFormat},
                  {"version", kVersion},
                  {"src", src},
                  {"tgt", tgt},
                  {"pairs", pairs},
                  {"tokens", tokens},
                  {"id_bytes", id_bytes},
                  {"pieces", pieces},
                  {"fingerprint", fmt::format("{:016x}", fingerprint)},
                  {"lengths_digest", fmt::format("{:016x}", lengths_digest)},
                  {"sampled_sentences", sampled_sentences},
                  {"read", read},
                  {"dropped",
                   {{"longer than --max-pieces", dropped_long},
                    {"over --max-ratio", dropped_ratio},
                    {"an empty side", dropped_empty},
                    {"duplicates", dropped_duplicates}}},
                  {"arguments", json::parse(arguments)}};
  return j.dump(2) + "\n";
}

StoreManifest StoreManifest::from_json(const std::string& text, const std::string& path) {
  StoreManifest m;
  try {
    const json j = json::parse(text);
    LOOM_CHECK(j.value("format", "") == kFormat, "'{}' is not a loom corpus store's manifest (format '{}')", path,
               j.value("format", ""));
    const int version = j.at("version").get<int>();
    LOOM_CHECK(version == kVersion,
               "'{}' is a corpus store of version {}; this loom reads version {}: prepare it again with `loom data "
               "prepare`",
               path, version, kVersion);
    m.src = j.at("src").get<std::string>();
    m.tgt = j.at("tgt").get<std::string>();
    m.pairs = j.at("pairs").get<int64_t>();
    m.tokens = j.at("tokens").get<int64_t>();
    m.id_bytes = j.at("id_bytes").get<int64_t>();
    m.pieces = j.at("pieces").get<int64_t>();
    m.fingerprint = std::stoull(j.at("fingerprint").get<std::string>(), nullptr, 16);
    m.lengths_digest = std::stoull(j.at("lengths_digest").get<std::string>(), nullptr, 16);
    m.sampled_sentences = j.at("sampled_sentences").get<int64_t>();
    m.read = j.at("read").get<int64_t>();
    const json& dropped = j.at("dropped");
    m.dropped_long = dropped.at("longer than --max-pieces").get<int64_t>();
    m.dropped_ratio = dropped.at("over --max-ratio").get<int64_t>();
    m.dropped_empty = dropped.at("an empty side").get<int64_t>();
    m.dropped_duplicates = dropped.at("duplicates").get<int64_t>();
    m.arguments = j.at("arguments").dump();
  } catch (const json::exception& e) {
    fail("cannot read the corpus store's manifest '{}': {} (prepare the store again)", path, e.what());
  } catch (const std::logic_error& e) {  // stoull
    fail("cannot read the corpus store's manifest '{}': a digest is not hexadecimal (prepare the store again)", path);
  }
  LOOM_CHECK(m.id_bytes == 2 || m.id_bytes == 4, "'{}' says ids of {} bytes; a store holds 2 or 4", path, m.id_bytes);
  LOOM_CHECK(m.pairs > 0 && m.tokens >= 0 && m.pieces > 4, "'{}' says {} pairs, {} tokens, {} pieces: not a store's",
             path, m.pairs, m.tokens, m.pieces);
  return m;
}

bool is_store(const std::string& dir) { return fs::is_regular_file(fs::path(dir) / "manifest.json"); }

StoreManifest read_manifest(const std::string& dir) {
  const std::string manifest_path = dir + "/manifest.json";
  LOOM_CHECK(fs::is_directory(dir), "corpus store '{}': no such folder", dir);
  LOOM_CHECK(fs::exists(manifest_path),
             "'{}' is not a corpus store: it has no manifest.json (make one with `loom data prepare`; a store "
             "being written is named <store>.tmp.<pid> until it is whole)",
             dir);
  return StoreManifest::from_json(read_file(manifest_path), manifest_path);
}

CorpusStore::CorpusStore(const std::string& dir) : dir_(dir), manifest_(read_manifest(dir)) {
  auto map = [&](const char* name, int64_t expected_bytes) {
    const std::string path = dir + "/" + name;
    LOOM_CHECK(fs::exists(path), "corpus store '{}': '{}' is missing (prepare the store again)", dir, path);
    auto file = std::make_unique<MappedFile>(path);
    LOOM_CHECK(static_cast<int64_t>(file->size()) == expected_bytes,
               "corpus store '{}': '{}' is {} bytes, its manifest says {} ({}); prepare the store again", dir, path,
               file->size(), expected_bytes,
               static_cast<int64_t>(file->size()) < expected_bytes ? "truncated" : "not the manifest's file");
    return file;
  };
  lengths_file_ = map("train.lengths", manifest_.pairs * static_cast<int64_t>(sizeof(PairLength)));
  tokens_file_ = map("train.tokens", manifest_.tokens * manifest_.id_bytes);
  tokens_file_->expect_random_access();
  lengths_ = {reinterpret_cast<const PairLength*>(lengths_file_->bytes().data()), static_cast<size_t>(manifest_.pairs)};
  // The lengths are read whole anyway (batching sorts by them): check them, and find the blocks' offsets.
  ByteHash digest;
  digest.add({reinterpret_cast<const char*>(lengths_file_->bytes().data()), lengths_file_->size()});
  int64_t at = 0;
  block_offsets_.reserve(static_cast<size_t>(manifest_.pairs / kBlock + 1));
  for (int64_t i = 0; i < manifest_.pairs; ++i) {
    if (i % kBlock == 0) block_offsets_.push_back(at);
    const PairLength n = lengths_[static_cast<size_t>(i)];
    at += n.src + n.tgt;
  }
  LOOM_CHECK(digest.value() == manifest_.lengths_digest && at == manifest_.tokens,
             "corpus store '{}': 'train.lengths' does not match its manifest ({} tokens, the manifest says {}; "
             "digest {:016x}, the manifest says {:016x}): prepare the store again",
             dir, at, manifest_.tokens, digest.value(), manifest_.lengths_digest);
}

void CorpusStore::read_pair(int64_t i, int64_t* src, int64_t* tgt) const {
  LOOM_CHECK(i >= 0 && i < manifest_.pairs, "corpus store '{}': pair {} of {}", dir_, i, manifest_.pairs);
  int64_t at = block_offsets_[static_cast<size_t>(i / kBlock)];
  for (int64_t j = i - i % kBlock; j < i; ++j) at += lengths_[j].src + lengths_[j].tgt;
  const PairLength n = lengths_[static_cast<size_t>(i)];
  auto copy = [&](int64_t count, int64_t* out) {
    const std::byte* from = tokens_file_->bytes().data() + at * manifest_.id_bytes;
    for (int64_t k = 0; k < count; ++k) {
      int64_t id;
      if (manifest_.id_bytes == 2) {
        uint16_t v;
        std::memcpy(&v, from + 2 * k, 2);
        id = v;
      } else {
        int32_t v;
        std::memcpy(&v, from + 4 * k, 4);
        id = v;
      }
      LOOM_CHECK(id >= 0 && id < manifest_.pieces,
                 "corpus store '{}': pair {} holds id {}, outside its vocabulary of {} (a damaged 'train.tokens': "
                 "prepare the store again)",
                 dir_, i, id, manifest_.pieces);
      out[k] = id;
    }
    at += count;
  };
  copy(n.src, src);
  copy(n.tgt, tgt);
}

}  // namespace loom::models
