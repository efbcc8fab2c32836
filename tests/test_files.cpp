// Files loom writes: atomic (temporary + fsync + rename), never half-written,
// even when the writing process is killed (SIGKILL) at a random point.
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "loom/atomic_file.h"
#include "loom/nn.h"
#include "loom/ops.h"
#include "helpers.h"

using namespace loom;
using loom::testing::error_of;
namespace fs = std::filesystem;

namespace {
// A fresh folder per test case, removed at its end.
struct Scratch {
  fs::path dir = fs::temp_directory_path() / ("loom_test_files_" + std::to_string(::getpid()));
  Scratch() { fs::create_directories(dir); }
  ~Scratch() { fs::remove_all(dir); }
  std::string operator/(const std::string& name) const { return (dir / name).string(); }
  size_t count() const { return static_cast<size_t>(std::distance(fs::directory_iterator(dir), {})); }
};

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}
}  // namespace

TEST_CASE("an atomic file appears whole at commit, or not at all") {
  Scratch scratch;
  const std::string path = scratch / "out.txt";
  write_file(path, "old\n");
  {
    AtomicFile file(path);
    file.stream() << "new, half";
    CHECK(read_all(path) == "old\n");  // nothing shows before commit
  }                                    // destroyed uncommitted: an error on the way
  CHECK(read_all(path) == "old\n");
  CHECK(scratch.count() == 1);  // and its temporary is gone
  {
    AtomicFile file(path);
    file.stream() << "new\n";
    file.commit();
  }
  CHECK(read_all(path) == "new\n");
  CHECK(scratch.count() == 1);
  fs::create_directories(scratch / "folder");
  CHECK(error_of([&] { write_file(scratch / "folder", "x"); }) ==
        "cannot write '" + (scratch / "folder") + "': it is a folder");
  CHECK(error_of([&] {
          write_file(scratch / "nowhere/out.txt", "x");
        }).find("cannot write '" + (scratch / "nowhere/out.txt") + "': cannot create") == 0);
  CHECK(scratch.count() == 2);  // out.txt and folder: no temporaries
}

TEST_CASE("SIGKILL at random points while saving checkpoints: the file on disk always loads, whole") {
  Scratch scratch;
  const std::string path = scratch / "model.safetensors";
  const int64_t n = 1 << 20;  // 4 MiB: a save takes long enough for kills to land inside it
  auto checkpoint = [&](int64_t version) {
    return nn::NamedTensors{{"w", from_vector(std::vector<float>(n, static_cast<float>(version)), {n})},
                            {"b", from_vector(std::vector<float>(16, static_cast<float>(-version)), {16})}};
  };
  // One save timed here sets the kill times: under a sanitizer on a loaded machine a
  // save takes far longer than in a Release build on a quiet one.
  const auto save_start = std::chrono::steady_clock::now();
  nn::save_safetensors(path, checkpoint(0), {{"version", "0"}});
  const auto save_time =
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - save_start);
  int mid_write = 0, last_version = 0;
  const int trials = 40;
  for (int trial = 0; trial < trials; ++trial) {
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {  // saves new versions until killed (no OpenMP here: forked processes must not)
      for (int64_t v = last_version + 1;; ++v)
        nn::save_safetensors(path, checkpoint(v), {{"version", std::to_string(v)}});
    }
    // Kill times spread from half a save to four saves, in steps of half a save.
    std::this_thread::sleep_for(std::chrono::microseconds(500) + save_time * ((trial * 5) % 8 + 1) / 2);
    ::kill(child, SIGKILL);
    int status = 0;
    ::waitpid(child, &status, 0);
    REQUIRE(WIFSIGNALED(status));
    if (fs::exists(path + ".tmp." + std::to_string(child))) {  // killed inside a save
      ++mid_write;
      fs::remove(path + ".tmp." + std::to_string(child));
    }
    // Whatever the moment of the kill: one whole version, never a mix or a torn file.
    nn::TensorFile file = nn::load_safetensors(path);
    const int version = std::stoi(file.metadata.at("version"));
    CHECK(version >= last_version);
    REQUIRE(file.tensors.size() == 2);
    for (const auto& [name, t] : file.tensors) {
      const float expected = name == "w" ? static_cast<float>(version) : static_cast<float>(-version);
      const std::vector<float> values = t.to_vector<float>();
      CHECK(values.size() == (name == "w" ? static_cast<size_t>(n) : 16u));
      CHECK(std::all_of(values.begin(), values.end(), [&](float x) { return x == expected; }));
    }
    last_version = version;
  }
  MESSAGE(trials << " kills, " << mid_write << " inside a save; last version on disk " << last_version);
  CHECK(last_version > 0);  // the children did save
}
