#include "loom/nn/checkpoint.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <nlohmann/json.hpp>

#include <zlib.h>

#include "loom/atomic_file.h"
#include "loom/ops.h"

namespace loom::nn {

namespace {

using json = nlohmann::json;

const char* safetensors_dtype(DType t) {
  switch (t) {
    case DType::f32: return "F32";
    case DType::f64: return "F64";
    case DType::i32: return "I32";
    case DType::i64: return "I64";
    case DType::b8: return "BOOL";
    case DType::bf16: return "BF16";
  }
  return "?";
}

bool dtype_from_safetensors(const std::string& s, DType& t) {
  static const std::pair<const char*, DType> table[] = {{"F32", DType::f32}, {"F64", DType::f64},
                                                        {"I32", DType::i32}, {"I64", DType::i64},
                                                        {"BOOL", DType::b8}, {"BF16", DType::bf16}};
  for (const auto& [name, dtype] : table)
    if (s == name) {
      t = dtype;
      return true;
    }
  return false;
}

// zlib's CRC-32 of n bytes (crc32_z takes a size_t: tensors past 4 GiB too).
uint32_t crc32_of(const void* data, size_t n) {
  return static_cast<uint32_t>(crc32_z(0, static_cast<const Bytef*>(data), n));
}

std::string hex8(uint32_t value) { return fmt::format("{:08x}", value); }

}  // namespace

void save_safetensors(const std::string& path, const NamedTensors& tensors, const Metadata& metadata) {
  json header = json::object();
  json checksums = json::object();
  std::vector<Tensor> data;  // contiguous CPU copies, in file order
  uint64_t offset = 0;
  for (const auto& [name, tensor] : tensors) {
    LOOM_CHECK(!name.empty() && name != "__metadata__", "save_safetensors '{}': invalid tensor name '{}'", path, name);
    LOOM_CHECK(!header.contains(name), "save_safetensors '{}': tensor name '{}' appears twice", path, name);
    LOOM_CHECK(tensor.defined(), "save_safetensors '{}': tensor '{}' is undefined", path, name);
    Tensor dense = tensor.detach().to(kCPU).contiguous();
    const uint64_t bytes = static_cast<uint64_t>(dense.numel()) * dtype_size(dense.dtype());
    header[name] = {{"dtype", safetensors_dtype(dense.dtype())},
                    {"shape", dense.shape()},
                    {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
    checksums[name] = hex8(crc32_of(dense.raw_data(), bytes));
    data.push_back(dense);
  }
  json meta = metadata;  // a checksum list passed along from a loaded file is replaced by this file's
  if (!tensors.empty()) meta[kChecksumsKey] = checksums.dump();
  if (!meta.empty()) header["__metadata__"] = meta;
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // data starts 8-byte aligned

  // Through a temporary renamed over the target (loom/atomic_file.h): a crash
  // leaves the old checkpoint or the new one, never half of one.
  AtomicFile file(path);
  std::ostream& out = file.stream();
  uint64_t length = text.size();
  unsigned char length_bytes[8];
  for (int i = 0; i < 8; ++i) length_bytes[i] = static_cast<unsigned char>(length >> (8 * i));
  out.write(reinterpret_cast<const char*>(length_bytes), 8);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  for (const Tensor& t : data)
    out.write(static_cast<const char*>(t.raw_data()), static_cast<std::streamsize>(t.numel() * dtype_size(t.dtype())));
  file.commit();
}

namespace {

// A checkpoint's header, every entry checked against the file's size: what
// load_safetensors reads the tensors by, and all that load_safetensors_metadata needs.
struct Header {
  struct Entry {
    std::string name;
    DType dtype;
    Shape shape;
    uint64_t begin, end;  // byte offsets into the data, which starts at data_begin
  };
  Metadata metadata;                          // without the checksums
  std::map<std::string, uint32_t> checksums;  // by tensor name; empty for a file written before them
  std::vector<Entry> entries;                 // by data offset, none overlapping
  uint64_t data_begin = 0;
};

// The checksums the metadata lists (kChecksumsKey), each of a tensor in the header.
std::map<std::string, uint32_t> read_checksums(const std::string& path, const std::string& text,
                                               const std::vector<Header::Entry>& entries) {
  std::map<std::string, uint32_t> checksums;
  json listed;
  try {
    listed = json::parse(text);
  } catch (const json::exception& e) {
    fail("load_safetensors '{}': the metadata's {} is not JSON: {}", path, kChecksumsKey, e.what());
  }
  LOOM_CHECK(listed.is_object(), "load_safetensors '{}': the metadata's {} is not a JSON object", path, kChecksumsKey);
  for (const auto& item : listed.items()) {
    const bool named = std::any_of(entries.begin(), entries.end(), [&](const auto& e) { return e.name == item.key(); });
    LOOM_CHECK(named, "load_safetensors '{}': {} lists '{}', which is not a tensor of the file", path, kChecksumsKey,
               item.key());
    const std::string hex = item.value().is_string() ? item.value().get<std::string>() : "";
    LOOM_CHECK(hex.size() == 8 && hex.find_first_not_of("0123456789abcdef") == std::string::npos,
               "load_safetensors '{}': the checksum of '{}' is {}, not 8 hex digits", path, item.key(),
               item.value().dump());
    checksums[item.key()] = static_cast<uint32_t>(std::stoul(hex, nullptr, 16));
  }
  return checksums;
}

// Reads and checks the header of `path`, opened in `in`.
Header read_header(const std::string& path, std::ifstream& in) {
  const uint64_t file_size = static_cast<uint64_t>(in.tellg());
  in.seekg(0);
  LOOM_CHECK(file_size >= 8, "load_safetensors '{}': the file has {} bytes, fewer than the 8-byte header length", path,
             file_size);
  unsigned char length_bytes[8] = {};
  in.read(reinterpret_cast<char*>(length_bytes), 8);
  LOOM_CHECK(in.good(), "load_safetensors '{}': reading the header length failed: {}", path, std::strerror(errno));
  uint64_t header_size = 0;
  for (int i = 0; i < 8; ++i) header_size |= static_cast<uint64_t>(length_bytes[i]) << (8 * i);
  LOOM_CHECK(header_size <= file_size - 8,
             "load_safetensors '{}': the header claims {} bytes but only {} follow the length field (truncated or "
             "not a safetensors file)",
             path, header_size, file_size - 8);
  std::string text(header_size, '\0');
  in.read(text.data(), static_cast<std::streamsize>(header_size));
  LOOM_CHECK(in.good(), "load_safetensors '{}': reading the {}-byte header failed: {}", path, header_size,
             std::strerror(errno));
  json header;
  try {
    header = json::parse(text);
  } catch (const json::parse_error& e) {
    fail("load_safetensors '{}': the JSON header is corrupt at byte offset {} of the file: {}", path, 8 + e.byte - 1,
         e.what());
  } catch (const json::exception& e) {  // e.g. a number too large for any JSON number type (found by fuzz_safetensors)
    fail("load_safetensors '{}': the JSON header cannot be read: {}", path, e.what());
  }
  LOOM_CHECK(header.is_object(), "load_safetensors '{}': the header is not a JSON object", path);

  Header parsed;
  parsed.data_begin = 8 + header_size;
  const uint64_t data_size = file_size - parsed.data_begin;
  using Entry = Header::Entry;
  std::vector<Entry>& entries = parsed.entries;
  for (const auto& item : header.items()) {  // not a structured binding: `bad` captures the name (clang + OpenMP)
    const std::string& name = item.key();
    const json& spec = item.value();
    if (name == "__metadata__") {
      LOOM_CHECK(spec.is_object(), "load_safetensors '{}': __metadata__ must be an object of strings", path);
      for (const auto& [key, value] : spec.items()) {
        LOOM_CHECK(value.is_string(), "load_safetensors '{}': metadata '{}' is not a string", path, key);
        parsed.metadata[key] = value.get<std::string>();
      }
      continue;
    }
    auto bad = [&](const std::string& why) { fail("load_safetensors '{}': tensor '{}': {}", path, name, why); };
    if (!spec.is_object() || !spec.contains("dtype") || !spec.contains("shape") || !spec.contains("data_offsets"))
      bad("needs dtype, shape and data_offsets");
    Entry e{name, DType::f32, {}, 0, 0};
    if (!spec["dtype"].is_string() || !dtype_from_safetensors(spec["dtype"].get<std::string>(), e.dtype))
      bad(fmt::format("unsupported dtype {}", spec["dtype"].dump()));
    if (!spec["shape"].is_array()) bad("shape is not an array");
    for (const auto& d : spec["shape"]) {
      if (!d.is_number_unsigned())
        bad(fmt::format("shape {} has a non-integer or negative size", spec["shape"].dump()));
      if (d.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
        bad(fmt::format("shape {} has a size of 2^63 or more", spec["shape"].dump()));
      e.shape.push_back(d.get<int64_t>());
    }
    const auto& offsets = spec["data_offsets"];
    if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
        !offsets[1].is_number_unsigned())
      bad("data_offsets must be two unsigned integers");
    e.begin = offsets[0].get<uint64_t>();
    e.end = offsets[1].get<uint64_t>();
    // Checked products: a crafted shape must not wrap around to a small byte count.
    uint64_t needed = dtype_size(e.dtype);
    if (std::find(e.shape.begin(), e.shape.end(), 0) != e.shape.end()) needed = 0;
    for (int64_t d : e.shape)
      if (__builtin_mul_overflow(needed, static_cast<uint64_t>(d), &needed))
        bad(fmt::format("shape {} of {} has more bytes than a 64-bit count holds", spec["shape"].dump(),
                        dtype_name(e.dtype)));
    if (e.begin > e.end || e.end > data_size)
      bad(fmt::format("data_offsets [{}, {}] lie outside the {} data bytes (the file is truncated?)", e.begin, e.end,
                      data_size));
    if (e.end - e.begin != needed)
      bad(fmt::format("data_offsets [{}, {}] hold {} bytes but shape {} of {} needs {}", e.begin, e.end,
                      e.end - e.begin, e.shape, dtype_name(e.dtype), needed));
    entries.push_back(std::move(e));
  }
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return a.begin < b.begin; });
  for (size_t i = 1; i < entries.size(); ++i)
    LOOM_CHECK(entries[i].begin >= entries[i - 1].end, "load_safetensors '{}': tensors '{}' and '{}' overlap", path,
               entries[i - 1].name, entries[i].name);
  if (auto listed = parsed.metadata.find(kChecksumsKey); listed != parsed.metadata.end()) {
    parsed.checksums = read_checksums(path, listed->second, entries);
    parsed.metadata.erase(listed);
  }
  return parsed;
}

// `path` opened for reading at its end (tellg gives its size), or an error naming it.
std::ifstream open_checkpoint(const std::string& path) {
  // A folder opens as a stream on Linux and reads as garbage, and opening a FIFO blocks
  // until someone writes to it: only a regular file (or a link to one) is read.
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  LOOM_CHECK(!std::filesystem::is_directory(status), "load_safetensors: '{}' is a folder, not a checkpoint file", path);
  LOOM_CHECK(!std::filesystem::exists(status) || std::filesystem::is_regular_file(status),
             "load_safetensors: '{}' is not a regular file (a FIFO, socket or device), not a checkpoint file", path);
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  LOOM_CHECK(in.good(), "load_safetensors: cannot open '{}': {}", path, std::strerror(errno));
  return in;
}

}  // namespace

TensorFile load_safetensors(const std::string& path, Checksums checksums) {
  std::ifstream in = open_checkpoint(path);
  Header header = read_header(path, in);
  TensorFile file{.tensors = {}, .metadata = std::move(header.metadata)};
  for (const Header::Entry& e : header.entries) {
    Tensor t = Tensor::empty(e.shape, {e.dtype});
    in.seekg(static_cast<std::streamoff>(header.data_begin + e.begin));
    in.read(static_cast<char*>(t.raw_data()), static_cast<std::streamsize>(e.end - e.begin));
    LOOM_CHECK(in.good(), "load_safetensors '{}': reading tensor '{}' failed", path, e.name);
    auto written = header.checksums.find(e.name);
    if (checksums == Checksums::verify && written != header.checksums.end()) {
      const uint32_t read = crc32_of(t.raw_data(), e.end - e.begin);
      LOOM_CHECK(read == written->second,
                 "load_safetensors '{}': tensor '{}' does not match its checksum (crc32 {} written, {} read): the "
                 "file was damaged after it was saved",
                 path, e.name, hex8(written->second), hex8(read));
    }
    file.tensors.emplace_back(e.name, t);
  }
  return file;
}

Metadata load_safetensors_metadata(const std::string& path) {
  std::ifstream in = open_checkpoint(path);
  return read_header(path, in).metadata;
}

void save(const Module& module, const std::string& path, const Metadata& metadata) {
  save_safetensors(path, module.named_parameters(), metadata);
}

Metadata load(Module& module, const std::string& path, bool allow_unexpected) {
  return load(module, load_safetensors(path), path, allow_unexpected);
}

Metadata load(Module& module, const TensorFile& file, const std::string& path, bool allow_unexpected) {
  std::map<std::string, Tensor> by_name(file.tensors.begin(), file.tensors.end());
  auto params = module.named_parameters();
  // Check everything before writing anything: an error leaves the module as it was.
  for (const auto& [name, param] : params) {
    auto it = by_name.find(name);
    LOOM_CHECK(it != by_name.end(), "load '{}': the checkpoint has no tensor '{}' (shape {})", path, name,
               param.shape());
    LOOM_CHECK(it->second.shape() == param.shape() && it->second.dtype() == param.dtype(),
               "load '{}': tensor '{}' is {} {} in the checkpoint but {} {} in the model", path, name,
               dtype_name(it->second.dtype()), it->second.shape(), dtype_name(param.dtype()), param.shape());
  }
  if (!allow_unexpected) {
    std::set<std::string> known;
    for (const auto& [name, param] : params) known.insert(name);
    for (const auto& [name, tensor] : file.tensors)
      LOOM_CHECK(known.count(name),
                 "load '{}': the checkpoint's tensor '{}' (shape {}) is not a parameter of the model", path, name,
                 tensor.shape());
  }
  NoGradGuard no_grad;
  for (auto& [name, param] : params) copy_(param, by_name.at(name).to(param.device()));
  return file.metadata;
}

}  // namespace loom::nn
