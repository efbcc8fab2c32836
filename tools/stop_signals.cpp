#include "stop_signals.h"

#include <pthread.h>
#include <signal.h>

#include <csignal>
#include <cstdlib>
#include <thread>

#include "loom/atomic_file.h"

namespace loom::tools {

namespace {

std::atomic<bool> scope_active{false};
std::atomic<bool> requested{false};
std::atomic<int> requested_by{0};

sigset_t stop_set() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}

// The default action of `signal`, taken now: this thread alone unblocks it.
// Files being written die with the process: their temporaries go first.
[[noreturn]] void die_of(int signal) {
  remove_live_temporaries();
  std::signal(signal, SIG_DFL);
  sigset_t one;
  sigemptyset(&one);
  sigaddset(&one, signal);
  pthread_sigmask(SIG_UNBLOCK, &one, nullptr);
  raise(signal);
  std::_Exit(128 + signal);  // not reached: SIGINT and SIGTERM terminate by default
}

void watch() {
  const sigset_t set = stop_set();
  for (;;) {
    int signal = 0;
    if (sigwait(&set, &signal) != 0) continue;
    if (scope_active.load() && !requested.load()) {
      requested_by.store(signal);
      requested.store(true);
    } else {
      die_of(signal);
    }
  }
}

}  // namespace

void route_stop_signals() {
  const sigset_t set = stop_set();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::thread(watch).detach();
}

StopScope::StopScope() {
  requested.store(false);
  requested_by.store(0);
  scope_active.store(true);
}

StopScope::~StopScope() { scope_active.store(false); }

bool stop_requested() { return requested.load(); }
const std::atomic<bool>& stop_flag() { return requested; }
int stop_signal() { return requested_by.load(); }

void unblock_stop_signals_in_child() {
  const sigset_t set = stop_set();
  pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
}

}  // namespace loom::tools
