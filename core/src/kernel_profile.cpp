#include "loom/kernel_profile.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <mutex>

#include "loom/autograd.h"
#include "loom/backend.h"
#include "loom/error.h"

namespace loom {

namespace {
std::atomic<bool> g_profiling{false};
std::mutex g_mutex;
Device g_wait_for;  // guarded by g_mutex: a GPU's kernels are timed to their end
struct Totals {
  int64_t calls = 0;
  int64_t nanoseconds = 0;
};
std::map<std::pair<std::string, std::string>, Totals> g_totals;  // (kernel, phase)
thread_local int tls_depth = 0;                                  // kernel calls open on this thread
thread_local const char* tls_phase = nullptr;                    // the innermost KernelPhase's name

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
}  // namespace

KernelPhase::KernelPhase(const char* name) : previous_(tls_phase) { tls_phase = name; }
KernelPhase::~KernelPhase() { tls_phase = previous_; }

KernelProfile::KernelProfile(Device wait_for) {
  LOOM_CHECK(!g_profiling.exchange(true), "KernelProfile: another profile is already collecting");
  std::lock_guard lock(g_mutex);
  g_wait_for = wait_for;
  g_totals.clear();
}

KernelProfile::~KernelProfile() { g_profiling.store(false); }

void KernelProfile::clear() {
  std::lock_guard lock(g_mutex);
  g_totals.clear();
}

std::vector<KernelTime> KernelProfile::rows() const {
  std::vector<KernelTime> rows;
  {
    std::lock_guard lock(g_mutex);
    for (const auto& [key, totals] : g_totals)
      rows.push_back({key.first, key.second, totals.calls, static_cast<double>(totals.nanoseconds) * 1e-9});
  }
  std::stable_sort(rows.begin(), rows.end(),
                   [](const KernelTime& a, const KernelTime& b) { return a.seconds > b.seconds; });
  return rows;
}

double KernelProfile::kernel_seconds() const {
  double sum = 0;
  for (const KernelTime& row : rows()) sum += row.seconds;
  return sum;
}

namespace detail {

bool kernel_profiling() { return g_profiling.load(std::memory_order_relaxed); }

KernelTimer::KernelTimer(std::string_view kernel) : kernel_(kernel) {
  if (tls_depth++ == 0 && kernel_profiling()) start_ns_ = now_ns();
}

KernelTimer::~KernelTimer() {
  --tls_depth;
  if (start_ns_ < 0) return;
  Device wait_for;
  {
    std::lock_guard lock(g_mutex);
    wait_for = g_wait_for;
  }
  if (!wait_for.is_cpu()) backend(wait_for.type).synchronize(wait_for.index);
  const int64_t elapsed = now_ns() - start_ns_;
  std::lock_guard lock(g_mutex);
  const char* phase = in_backward() ? "backward" : tls_phase ? tls_phase : "forward";
  Totals& totals = g_totals[std::pair{std::string(kernel_), std::string(phase)}];
  totals.calls += 1;
  totals.nanoseconds += elapsed;
}

}  // namespace detail

}  // namespace loom
