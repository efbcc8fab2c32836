// loom's all-reduce (Reduce::exact, Reduce::fast) against Open MPI's own
// MPI_Allreduce on the same float32 buffer, at sizes from 4 KiB to 100 MiB (25 MiB:
// PyTorch DDP's default bucket). The three alternate within each round, so they share
// the machine's drift; each sample is the slowest rank's time (a collective ends when
// its last rank does). Run by bench/dp.sh:
//   mpiexec -n 2 build/bench/loom_bench_allreduce [--rounds N]
#include <mpi.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "loom/dist.h"

using namespace loom;
using namespace loom::dist;

namespace {

enum Mode { kExact, kFast, kMpi, kModes };
const char* const kModeNames[kModes] = {"exact", "fast", "MPI"};

struct Size {
  const char* label;
  int64_t bytes;
};

// Values start at 2^-60 so that up to 32 in-place sums over up to 16 ranks stay
// finite and normal: no denormal or infinity arithmetic in any mode.
const float kStart = std::ldexp(1.0f, -60);

void run(Communicator& comm, Mode mode, Tensor& t) {
  if (mode == kMpi) {
    MPI_Allreduce(MPI_IN_PLACE, t.raw_data(), static_cast<int>(t.numel()), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  } else {
    comm.all_reduce_sum(t, mode == kExact ? Reduce::exact : Reduce::fast);
  }
}

struct Sample {
  double seconds;  // per call, the slowest rank's
  double faults;   // minor page faults per call on rank 0: fresh pages the call touched
};

long minor_faults() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_minflt;
}

// `reps` calls, started together on every rank.
Sample sample(Communicator& comm, Mode mode, Tensor& t, int reps) {
  std::fill_n(t.data<float>(), t.numel(), kStart);  // outside the timing, the same for every mode
  MPI_Barrier(MPI_COMM_WORLD);
  const long faults = minor_faults();
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < reps; ++i) run(comm, mode, t);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / reps;
  const double faults_per_call = static_cast<double>(minor_faults() - faults) / reps;
  MPI_Allreduce(MPI_IN_PLACE, &seconds, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return {seconds, faults_per_call};
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// Per mode, over `rounds` rounds (the order of the three rotating per round): the
// median time per call and the mean page faults per call.
std::vector<Sample> medians(Communicator& comm, Tensor& t, int rounds, int reps) {
  std::vector<std::vector<double>> seconds(kModes);
  std::vector<double> faults(kModes, 0.0);
  for (int m = 0; m < kModes; ++m) sample(comm, Mode(m), t, 1);  // warm-up: connections, pages
  for (int round = 0; round < rounds; ++round)
    for (int i = 0; i < kModes; ++i) {
      const int m = (round + i) % kModes;
      const Sample s = sample(comm, Mode(m), t, reps);
      seconds[m].push_back(s.seconds);
      faults[m] += s.faults / rounds;
    }
  std::vector<Sample> result;
  for (int m = 0; m < kModes; ++m) result.push_back({median(seconds[m]), faults[m]});
  return result;
}

// Rank r holds r + 1 everywhere: every mode must give P (P + 1) / 2, exactly.
void check_sums(Communicator& comm, Tensor& t) {
  const int world = comm.world_size();
  const float expected = static_cast<float>(world) * (world + 1) / 2;
  for (int m = 0; m < kModes; ++m) {
    std::fill_n(t.data<float>(), t.numel(), static_cast<float>(comm.rank() + 1));
    run(comm, Mode(m), t);
    const float* p = t.data<float>();
    if (std::any_of(p, p + t.numel(), [&](float v) { return v != expected; }))
      comm.abort(1, std::string("loom_bench_allreduce: a wrong sum from ") + kModeNames[m]);
  }
}

std::string load_average() {
  std::ifstream file("/proc/loadavg");
  std::string a, b, c;
  file >> a >> b >> c;
  return file ? a + " " + b + " " + c : "(unknown)";
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 30;  // for sizes up to 4 MiB; the larger ones take a third (at least 3)
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--rounds") == 0 && i + 1 < argc) {
      rounds = std::max(1, std::atoi(argv[++i]));
    } else {
      std::fprintf(stderr, "usage: mpiexec -n P %s [--rounds N]\n", argv[0]);
      return 2;
    }
  }
  // The program's own MPI (loom then neither starts nor finalises it), so that the
  // raw MPI_Allreduce runs on the same library, in the same processes, as loom's.
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  {
    auto comm = make_communicator("mpi");
    const int rank = comm->rank(), world = comm->world_size();
    // NCCL-tests' bus bandwidth: what each rank's link carries for a ring or halving all-reduce.
    const double bus_factor = 2.0 * (world - 1) / world;
    if (rank == 0) {
      char version[MPI_MAX_LIBRARY_VERSION_STRING];
      int length = 0;
      MPI_Get_library_version(version, &length);
      const std::string library(version, std::strcspn(version, ",\n"));
      const char* threads = std::getenv("OMP_NUM_THREADS");
      std::printf("loom_bench_allreduce: %d ranks, %s, OMP_NUM_THREADS=%s, load average: %s\n", world, library.c_str(),
                  threads ? threads : "(unset)", load_average().c_str());
      std::printf(
          "float32 in place; median ms per call of the slowest rank over alternated rounds; "
          "bus GB/s = bytes / time * 2(P-1)/P\n");
    }

    // The fixed cost of every call: agree()'s all-reduce of the arguments, then the
    // exact tree's log2(P) steps there and back on one element.
    {
      Tensor one = Tensor::empty({1}, {DType::f32});
      const std::vector<Sample> tiny = medians(*comm, one, 4 * rounds, 32);
      if (rank == 0)
        std::printf("1 element: exact %.1f us, fast %.1f us, MPI %.1f us (fast - MPI = agree(): %.1f us)\n\n",
                    1e6 * tiny[kExact].seconds, 1e6 * tiny[kFast].seconds, 1e6 * tiny[kMpi].seconds,
                    1e6 * (tiny[kFast].seconds - tiny[kMpi].seconds));
    }

    if (rank == 0)
      std::printf("%8s %9s %9s %9s %10s %10s %10s %9s  %s\n", "size", "exact ms", "fast ms", "MPI ms", "exact GB/s",
                  "fast GB/s", "MPI GB/s", "exact/MPI", "page faults/call (exact fast MPI)");
    const Size sizes[] = {{"4 KiB", 4 << 10}, {"64 KiB", 64 << 10}, {"1 MiB", 1 << 20},
                          {"4 MiB", 4 << 20}, {"25 MiB", 25 << 20}, {"100 MiB", 100 << 20}};
    for (const Size& size : sizes) {
      Tensor t = Tensor::empty({size.bytes / 4}, {DType::f32});
      check_sums(*comm, t);
      // Several calls per sample where one is too short to time well (at most 32: see kStart).
      const int reps = static_cast<int>(std::clamp<int64_t>((4 << 20) / size.bytes, 1, 32));
      const int size_rounds = size.bytes > (4 << 20) ? std::max(3, rounds / 3) : rounds;
      const std::vector<Sample> r = medians(*comm, t, size_rounds, reps);
      if (rank == 0) {
        auto bus = [&](double seconds) { return size.bytes / seconds * bus_factor / 1e9; };
        std::printf("%8s %9.3f %9.3f %9.3f %10.2f %10.2f %10.2f %8.2fx  %.0f %.0f %.0f\n", size.label,
                    1e3 * r[kExact].seconds, 1e3 * r[kFast].seconds, 1e3 * r[kMpi].seconds, bus(r[kExact].seconds),
                    bus(r[kFast].seconds), bus(r[kMpi].seconds), r[kExact].seconds / r[kMpi].seconds, r[kExact].faults,
                    r[kFast].faults, r[kMpi].faults);
        std::fflush(stdout);
      }
    }
  }
  MPI_Finalize();
  return 0;
}
