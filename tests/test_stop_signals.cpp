// Ctrl-C routing (tools/stop_signals.cpp): after route_stop_signals, SIGINT and
// SIGTERM are blocked in every thread that computes (OpenMP's included), so no
// signal frame is ever pushed onto a thread inside a kernel; the watcher thread
// takes them and sets the stop flag within a StopScope.
#include <doctest/doctest.h>

#include <omp.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <sys/wait.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "../tools/stop_signals.h"
#include "loom/atomic_file.h"

using namespace loom::tools;

namespace {
// Whether the calling thread blocks both signals.
bool blocks_stop_signals() {
  sigset_t mask;
  pthread_sigmask(SIG_BLOCK, nullptr, &mask);
  return sigismember(&mask, SIGINT) == 1 && sigismember(&mask, SIGTERM) == 1;
}

bool wait_for_stop() {
  for (int i = 0; i < 500 && !stop_requested(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return stop_requested();
}
}  // namespace

TEST_CASE("SIGINT and SIGTERM: blocked in every computing thread, taken by the watcher inside a StopScope") {
  CHECK_FALSE(blocks_stop_signals());
  route_stop_signals();  // as main() does, before any other thread starts
  CHECK(blocks_stop_signals());
  int unblocked = 0;
#pragma omp parallel num_threads(4) reduction(+ : unblocked)
  unblocked += blocks_stop_signals() ? 0 : 1;
  CHECK(unblocked == 0);
  std::thread([] { CHECK(blocks_stop_signals()); }).join();

  for (int signal : {SIGINT, SIGTERM}) {
    StopScope scope;
    CHECK_FALSE(stop_requested());
    // Threads busy computing while the signal arrives: it is taken by the watcher, not them.
    double sink = 0;
#pragma omp parallel num_threads(4) reduction(+ : sink)
    {
      if (omp_get_thread_num() == 0) ::kill(::getpid(), signal);
      for (int i = 0; i < 2000000; ++i) sink += std::sqrt(static_cast<double>(i));
    }
    CHECK(sink > 0);
    CHECK(wait_for_stop());
    CHECK(stop_signal() == signal);
    CHECK(stop_flag().load());
  }
  {
    StopScope fresh;  // a new scope starts unrequested
    CHECK_FALSE(stop_requested());
    CHECK(stop_signal() == 0);
  }
}

TEST_CASE("a second SIGINT during a save: loom dies of it, and the file being written leaves no temporary") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("loom_stop_signals_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string target = (dir / "training_state.safetensors").string();
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {  // a run that saves when the first signal comes, and gets a second one mid-save
    route_stop_signals();
    StopScope scope;
    ::kill(::getpid(), SIGINT);
    while (!stop_requested()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    loom::AtomicFile file(target);
    file.stream() << "half a save";
    file.stream().flush();
    ::kill(::getpid(), SIGINT);
    std::this_thread::sleep_for(std::chrono::seconds(10));
    std::_Exit(0);  // not reached: the second signal ends the process
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  CHECK(WIFSIGNALED(status));
  CHECK((WIFSIGNALED(status) && WTERMSIG(status) == SIGINT));
  std::vector<std::string> left;
  for (const auto& entry : fs::directory_iterator(dir)) left.push_back(entry.path().filename().string());
  INFO("left in the folder: " << (left.empty() ? std::string("nothing") : left.front()));
  CHECK(left.empty());
  fs::remove_all(dir);
}
