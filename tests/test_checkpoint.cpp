// Checkpoints: safetensors round trips, a file written byte by byte to the
// format's spec, and corrupt or mismatched files that must fail with a message
// naming the file and the problem while leaving the model untouched.
#include <doctest/doctest.h>
#include <sys/stat.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <cstring>
#include <functional>
#include <map>
#include <string>

#include "loom/nn.h"
#include "loom/ops.h"
#include "helpers.h"

using namespace loom;
using loom::testing::error_of;
using namespace loom::nn;

namespace {
struct Tiny : Module {
  Linear proj;
  LayerNorm norm{3};
  explicit Tiny(uint64_t seed, Generator gen = Generator(0)) : proj(2, 3, true, gen) {
    Generator g(seed);
    NoGradGuard no_grad;
    copy_(proj.weight, randn({3, 2}, {}, g));
    register_module("proj", proj);
    register_module("norm", norm);
  }
};

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("loom_test_" + name)).string();
}

void write_bytes(const std::string& path, const std::string& bytes) { std::ofstream(path, std::ios::binary) << bytes; }

std::string header_bytes(const std::string& json) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>((json.size() >> (8 * i)) & 0xff);
  return s + json;
}
}  // namespace

TEST_CASE("save then load: the same parameters bit for bit, metadata kept, no temporary left behind") {
  const std::string path = temp_path("roundtrip.safetensors");
  Tiny a(1), b(2);
  CHECK(a.proj.weight.to_vector<float>() != b.proj.weight.to_vector<float>());
  save(a, path, {{"config", "{\"d_model\": 3}"}});
  save(a, path, {{"config", "{\"d_model\": 3}"}});  // overwriting works
  Metadata meta = load(b, path);
  CHECK(meta.at("config") == "{\"d_model\": 3}");
  auto pa = a.named_parameters(), pb = b.named_parameters();
  for (size_t i = 0; i < pa.size(); ++i) CHECK(pa[i].second.to_vector<float>() == pb[i].second.to_vector<float>());
  for (const auto& entry : std::filesystem::directory_iterator(std::filesystem::temp_directory_path()))
    CHECK(entry.path().string().find("loom_test_roundtrip.safetensors.tmp") == std::string::npos);

  TensorFile file = load_safetensors(path);
  REQUIRE(file.tensors.size() == 4);
  CHECK(file.tensors[0].first == "proj.weight");
  CHECK(file.tensors[0].second.shape() == Shape{3, 2});
  std::remove(path.c_str());
}

TEST_CASE("bfloat16 tensors save as BF16 and load back bit for bit") {
  const std::string path = temp_path("bf16.safetensors");
  Tensor w = to_dtype(tensor({{0.1, -3.0}, {1e-3, 7.5}}), bf16);
  save_safetensors(path, {{"w", w}});
  TensorFile file = load_safetensors(path);
  REQUIRE(file.tensors.size() == 1);
  CHECK(file.tensors[0].second.dtype() == bf16);
  CHECK(to_dtype(file.tensors[0].second, f32).to_vector<float>() == to_dtype(w, f32).to_vector<float>());
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(bytes.find("\"BF16\"") != std::string::npos);
  std::remove(path.c_str());
}

TEST_CASE("a file written byte by byte to the safetensors spec loads") {
  const std::string path = temp_path("spec.safetensors");
  // Two tensors: "a" F32 [2] = {1.5, -2}, "b" I64 [1] = {7}; little-endian data after the header.
  std::string json = R"({"b":{"dtype":"I64","shape":[1],"data_offsets":[8,16]},)"
                     R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"__metadata__":{"format":"pt"}})";
  std::string data;
  auto put = [&](const void* p, size_t n) { data.append(static_cast<const char*>(p), n); };
  float a[2] = {1.5f, -2.0f};
  int64_t b = 7;
  put(a, sizeof a);
  put(&b, sizeof b);
  write_bytes(path, header_bytes(json) + data);
  TensorFile file = load_safetensors(path);
  REQUIRE(file.tensors.size() == 2);
  CHECK(file.tensors[0].first == "a");  // file order: by data offset
  CHECK(file.tensors[0].second.to_vector<float>() == std::vector<float>{1.5f, -2.0f});
  CHECK(file.tensors[1].second.dtype() == DType::i64);
  CHECK(file.tensors[1].second.to_vector<int64_t>() == std::vector<int64_t>{7});
  CHECK(file.metadata.at("format") == "pt");
  CHECK(load_safetensors_metadata(path) == file.metadata);
  std::remove(path.c_str());
}

TEST_CASE("corrupt files: each error names the file and what is wrong") {
  const std::string path = temp_path("corrupt.safetensors");
  // The header-only reader finds every one of these too, with the same message.
  auto load_error = [&] {
    const std::string message = error_of([&] { load_safetensors(path); });
    CHECK(error_of([&] { load_safetensors_metadata(path); }) == message);
    return message;
  };

  write_bytes(path, "abc");
  CHECK(load_error().find("has 3 bytes, fewer than the 8-byte header length") != std::string::npos);

  write_bytes(path, header_bytes("{}").substr(0, 8) + std::string(1, '{'));  // claims 2 header bytes, has 1
  CHECK(load_error().find("the header claims 2 bytes but only 1 follow") != std::string::npos);

  write_bytes(path, header_bytes(R"({"a": {"dtype": "F32",, }})"));
  std::string message = load_error();
  CHECK(message.find("'" + path + "': the JSON header is corrupt at byte offset 30 of the file") != std::string::npos);

  write_bytes(path, header_bytes(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})") + std::string(4, '\0'));
  CHECK(load_error().find("tensor 'a': data_offsets [0, 8] lie outside the 4 data bytes (the file is truncated?)") !=
        std::string::npos);

  write_bytes(path, header_bytes(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})") + std::string(8, '\0'));
  CHECK(load_error().find("tensor 'a': data_offsets [0, 8] hold 8 bytes but shape [3] of float32 needs 12") !=
        std::string::npos);

  write_bytes(path, header_bytes(R"({"a":{"dtype":"F8_E4M3","shape":[1],"data_offsets":[0,1]}})") + "x");
  CHECK(load_error().find("tensor 'a': unsupported dtype \"F8_E4M3\"") != std::string::npos);

  CHECK(error_of([] {
          load_safetensors("/nonexistent/dir/x.safetensors");
        }).find("load_safetensors: cannot open '/nonexistent/dir/x.safetensors'") != std::string::npos);
  std::remove(path.c_str());
}

TEST_CASE("each tensor's checksum: a flipped data byte names the tensor; skipping loads it; metadata is the caller's") {
  const std::string path = temp_path("checksum.safetensors");
  Tiny a(1), b(2);
  save(a, path, {{"config", "c"}});
  CHECK(load_safetensors_metadata(path) == Metadata{{"config", "c"}});  // the checksums are not the caller's
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  CHECK(bytes.find(std::string("\"") + kChecksumsKey + "\"") != std::string::npos);
  bytes.back() ^= 0x01;  // the last data byte: norm.bias's
  write_bytes(path, bytes);
  const std::string message = error_of([&] { load(b, path); });
  CHECK(message.find("load_safetensors '" + path + "': tensor 'norm.bias' does not match its checksum (crc32 ") !=
        std::string::npos);
  CHECK(message.find("the file was damaged after it was saved") != std::string::npos);
  CHECK(load_safetensors(path, Checksums::skip).tensors.size() == 4);
  // Saving what was loaded writes this file's checksums, not a stale list.
  TensorFile loaded = load_safetensors(path, Checksums::skip);
  save_safetensors(path, loaded.tensors, loaded.metadata);
  CHECK(load_safetensors(path).tensors.size() == 4);
  std::remove(path.c_str());
}

TEST_CASE("a FIFO (or any file that is not regular) is refused by name instead of blocking the reader") {
  const std::string path = temp_path("fifo.safetensors");
  std::remove(path.c_str());
  REQUIRE(mkfifo(path.c_str(), 0600) == 0);
  CHECK(error_of([&] { load_safetensors(path); }).find("'" + path + "' is not a regular file") != std::string::npos);
  CHECK(error_of([&] { load_safetensors_metadata(path); }).find("is not a regular file") != std::string::npos);
  std::remove(path.c_str());
}

TEST_CASE("a checkpoint that does not fit the model: named error, and the model is left as it was") {
  const std::string path = temp_path("mismatch.safetensors");
  Tiny model(3);
  const auto before = model.proj.weight.to_vector<float>();

  save_safetensors(path, {{"proj.weight", zeros({3, 2})},
                          {"proj.bias", zeros({4})},
                          {"norm.weight", zeros({3})},
                          {"norm.bias", zeros({3})}});
  CHECK(error_of([&] { load(model, path); }) ==
        "load '" + path + "': tensor 'proj.bias' is float32 [4] in the checkpoint but float32 [3] in the model");
  CHECK(model.proj.weight.to_vector<float>() == before);  // proj.weight came first in the file, but nothing was copied

  save_safetensors(path, {{"proj.weight", zeros({3, 2})}, {"proj.bias", zeros({3})}, {"norm.weight", zeros({3})}});
  CHECK(error_of([&] { load(model, path); }) ==
        "load '" + path + "': the checkpoint has no tensor 'norm.bias' (shape [3])");

  save_safetensors(path, {{"proj.weight", zeros({3, 2})},
                          {"proj.bias", zeros({3})},
                          {"norm.weight", zeros({3})},
                          {"norm.bias", zeros({3})},
                          {"extra", zeros({1})}});
  CHECK(error_of([&] { load(model, path); }) ==
        "load '" + path + "': the checkpoint's tensor 'extra' (shape [1]) is not a parameter of the model");
  CHECK(model.proj.weight.to_vector<float>() == before);
  load(model, path, /*allow_unexpected=*/true);
  CHECK(model.proj.weight.to_vector<float>() == std::vector<float>(6, 0.0f));
  std::remove(path.c_str());
}

TEST_CASE("average_checkpoints: the float64 mean of three files, in order; shared metadata kept") {
  const std::string a = temp_path("avg_a.safetensors"), b = temp_path("avg_b.safetensors"),
                    c = temp_path("avg_c.safetensors"), out = temp_path("avg_out.safetensors");
  const std::string config = R"({"d_model": 4})";
  // 0.1f + 0.2f + 0.3f summed in float32 rounds differently from float64: the
  // expected value is the float64 mean rounded once.
  save_safetensors(a,
                   {{"w", from_vector<float>({1, 2, 0.1f, -4}, {2, 2})},
                    {"d", from_vector<double>({1.0}, {1}, {DType::f64})},
                    {"n", from_vector<int64_t>({7}, {1}, {DType::i64})}},
                   {{"config", config}, {"step", "100"}});
  save_safetensors(b,
                   {{"w", from_vector<float>({2, 3, 0.2f, -5}, {2, 2})},
                    {"d", from_vector<double>({2.0}, {1}, {DType::f64})},
                    {"n", from_vector<int64_t>({7}, {1}, {DType::i64})}},
                   {{"config", config}, {"step", "200"}});
  save_safetensors(c,
                   {{"n", from_vector<int64_t>({7}, {1}, {DType::i64})},  // another order: matched by name
                    {"d", from_vector<double>({4.0}, {1}, {DType::f64})},
                    {"w", from_vector<float>({6, 7, 0.3f, -6}, {2, 2})}},
                   {{"config", config}, {"step", "300"}});
  Metadata meta = average_checkpoints({a, b, c}, out);
  TensorFile file = load_safetensors(out);
  REQUIRE(file.tensors.size() == 3);
  std::map<std::string, Tensor> by_name(file.tensors.begin(), file.tensors.end());
  const float third = static_cast<float>((double(0.1f) + double(0.2f) + double(0.3f)) / 3);
  CHECK(by_name.at("w").to_vector<float>() == std::vector<float>{3, 4, third, -5});
  CHECK(by_name.at("d").to_vector<double>() == std::vector<double>{7.0 / 3});
  CHECK(by_name.at("n").to_vector<int64_t>() == std::vector<int64_t>{7});
  CHECK(file.metadata == meta);
  CHECK(file.metadata.at("config") == config);
  CHECK(file.metadata.count("step") == 0);  // differs between the inputs: describes none of them
  CHECK(file.metadata.at("averaged_from") == "[\"" + a + "\",\"" + b + "\",\"" + c + "\"]");
  for (const auto& p : {a, b, c, out}) std::remove(p.c_str());
}

TEST_CASE("average_checkpoints: copies of one checkpoint average to its own bits") {
  const std::string a = temp_path("avg_self.safetensors"), out = temp_path("avg_self_out.safetensors");
  Tiny model(5);
  save(model, a, {{"config", "{}"}});
  for (size_t n : {2, 3, 5}) {
    average_checkpoints(std::vector<std::string>(n, a), out);
    TensorFile in = load_safetensors(a), averaged = load_safetensors(out);
    REQUIRE(in.tensors.size() == averaged.tensors.size());
    for (size_t i = 0; i < in.tensors.size(); ++i) {
      const Tensor &x = in.tensors[i].second, &y = averaged.tensors[i].second;
      CHECK(in.tensors[i].first == averaged.tensors[i].first);
      CHECK(std::memcmp(x.raw_data(), y.raw_data(), static_cast<size_t>(x.numel()) * sizeof(float)) == 0);
    }
  }
  std::remove(a.c_str());
  std::remove(out.c_str());
}

TEST_CASE("average_checkpoints: mismatches are errors naming the file and the tensor or field; nothing written") {
  const std::string a = temp_path("avg_m_a.safetensors"), b = temp_path("avg_m_b.safetensors"),
                    out = temp_path("avg_m_out.safetensors");
  std::remove(out.c_str());
  const Metadata meta{{"config", R"({"d_model": 4, "heads": 2})"}};
  save_safetensors(a, {{"x", zeros({2})}, {"y", zeros({3})}}, meta);
  auto average_error = [&] { return error_of([&] { average_checkpoints({a, b}, out); }); };

  save_safetensors(b, {{"x", zeros({2})}, {"y", zeros({4})}}, meta);
  CHECK(average_error() == "average: '" + b + "': tensor 'y' is float32 [4] but float32 [3] in '" + a + "'");
  save_safetensors(b, {{"x", zeros({2})}, {"y", zeros({3}, {DType::f64})}}, meta);
  CHECK(average_error() == "average: '" + b + "': tensor 'y' is float64 [3] but float32 [3] in '" + a + "'");
  save_safetensors(b, {{"x", zeros({2})}}, meta);
  CHECK(average_error() == "average: '" + b + "' has no tensor 'y' (float32 [3] in '" + a + "')");
  save_safetensors(b, {{"x", zeros({2})}, {"y", zeros({3})}, {"z", zeros({1})}}, meta);
  CHECK(average_error() == "average: '" + b + "' has a tensor 'z' that '" + a + "' lacks");
  save_safetensors(b, {{"x", zeros({2})}, {"y", zeros({3})}}, {{"config", R"({"d_model": 8, "heads": 2})"}});
  CHECK(average_error() ==
        "average: '" + b + "' has another 'config' than '" + a + "': field 'd_model' is 8 here but 4 in '" + a + "'");
  save_safetensors(b, {{"x", zeros({2})}, {"y", zeros({3})}});
  CHECK(average_error() == "average: '" + b + "' lacks metadata 'config' but '" + a + "' has it");
  CHECK(error_of([&] { average_checkpoints({a}, out); }) == "average: needs at least two checkpoints, got 1");
  CHECK(!std::filesystem::exists(out));
  for (const auto& p : {a, b}) std::remove(p.c_str());
}
