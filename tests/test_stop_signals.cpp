// Ctrl-C routing (tools/stop_signals.cpp): after route_stop_signals, SIGINT and
// SIGTERM are blocked in every thread that computes (OpenMP's included), so no
// signal frame is ever pushed onto a thread inside a kernel; the watcher thread
// takes them and sets the stop flag within a StopScope.
#include <doctest/doctest.h>

#include <omp.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <thread>

#include "../tools/stop_signals.h"

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
