// Files loom writes: atomic (temporary + fsync + rename), never half-written,
// even when the writing process is killed (SIGKILL) at a random point.
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
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

// The pid of a process that has exited (and been reaped).
pid_t dead_pid() {
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  int status = 0;
  ::waitpid(child, &status, 0);
  return child;
}
}  // namespace

TEST_CASE("an atomic file appears whole at commit, or not at all") {
  Scratch scratch;
  const std::string path = scratch / "out.txt";
  write_file(path, "old\n");
  {
    AtomicFile file(path);
    file.stream() << "new, half";
    CHECK(read_file(path) == "old\n");  // nothing shows before commit
  }                                     // destroyed uncommitted: an error on the way
  CHECK(read_file(path) == "old\n");
  CHECK(scratch.count() == 1);  // and its temporary is gone
  {
    AtomicFile file(path);
    file.stream() << "new\n";
    file.commit();
  }
  CHECK(read_file(path) == "new\n");
  CHECK(scratch.count() == 1);
  fs::create_directories(scratch / "folder");
  CHECK(error_of([&] { write_file(scratch / "folder", "x"); }) ==
        "cannot write '" + (scratch / "folder") + "': it is a folder");
  CHECK(error_of([&] {
          write_file(scratch / "nowhere/out.txt", "x");
        }).find("cannot write '" + (scratch / "nowhere/out.txt") + "': cannot create") == 0);
  CHECK(scratch.count() == 2);  // out.txt and folder: no temporaries
}

TEST_CASE("a whole file is read or named in the error; copies go through the atomic path") {
  Scratch scratch;
  write_file(scratch / "a", std::string("x\0y", 3));
  copy_file(scratch / "a", scratch / "b");
  CHECK(read_file(scratch / "b") == std::string("x\0y", 3));
  CHECK(error_of([&] { read_file(scratch / "none"); }) ==
        "cannot open '" + (scratch / "none") + "': No such file or directory");
  CHECK(error_of([&] { copy_file(scratch / "none", scratch / "c"); }).find("cannot open") == 0);
  CHECK(!fs::exists(scratch / "c"));
}

TEST_CASE("temporaries whose writer died are removed, files and folders; a living writer's are kept") {
  Scratch scratch;
  const std::string dead = std::to_string(dead_pid()), alive = std::to_string(::getpid());
  write_file(scratch / ("run.tmp." + dead), "x");
  fs::create_directories(scratch / ("store.tmp." + dead) + "/inside");
  write_file(scratch / ("store.tmp." + alive), "mine");
  write_file(scratch / ("storex.tmp." + dead), "another target's");
  write_file(scratch / "store.tmp.12a", "not a pid");
  CHECK(remove_dead_temporaries(scratch.dir.string(), "store") == std::vector<std::string>{"store.tmp." + dead});
  CHECK(scratch.count() == 4);
  std::vector<std::string> removed = remove_dead_temporaries(scratch.dir.string());
  std::sort(removed.begin(), removed.end());
  CHECK(removed == std::vector<std::string>{"run.tmp." + dead, "storex.tmp." + dead});
  CHECK(fs::exists(scratch / ("store.tmp." + alive)));
  CHECK(fs::exists(scratch / "store.tmp.12a"));
  CHECK(remove_dead_temporaries(scratch / "no such folder").empty());
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
