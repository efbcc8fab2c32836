// The table `--profile` prints (loom bench step, loom translate): each kernel's time
// per run in each phase, slowest first down to 0.5% of a run, then the products'
// share (matmul's and linear's: a Linear's product with its bias).
#include <fmt/format.h>

#include "commands.h"

namespace loom::tools {

nlohmann::json print_kernel_profile(const KernelProfile& profile, int runs, double run_seconds, const char* unit,
                                    const Device& device, std::FILE* out) {
  const double per_run = 1.0 / runs;
  auto share = [&](double seconds) { return 100 * seconds * per_run / run_seconds; };
  fmt::print(out, "kernel profile, per {} ({}{} on {}; wall time of each kernel call{}):\n", unit,
             runs == 1 ? "1 " : fmt::format("mean of {} ", runs), runs == 1 ? unit : fmt::format("{}s", unit), device,
             device.is_cpu() ? "" : ", the GPU waited for after each: its run, nothing overlapped");
  fmt::print(out, "  {:<38} {:<9} {:>8} {:>10} {:>7}\n", "kernel", "phase", "calls", "ms", "share");
  nlohmann::json rows = nlohmann::json::array();
  double matmul = 0, in_kernels = 0, hidden = 0;
  for (const KernelTime& row : profile.rows()) {
    const double ms = 1e3 * row.seconds * per_run;
    in_kernels += row.seconds;
    if (row.kernel == "matmul" || row.kernel == "linear") matmul += row.seconds;
    rows.push_back({{"kernel", row.kernel},
                    {"phase", row.phase},
                    {"calls", static_cast<double>(row.calls) * per_run},
                    {"ms", ms}});
    if (share(row.seconds) < 0.5) {
      hidden += row.seconds;
      continue;
    }
    fmt::print(out, "  {:<38} {:<9} {:>8.0f} {:>10.2f} {:>6.1f}%\n", row.kernel, row.phase,
               static_cast<double>(row.calls) * per_run, ms, share(row.seconds));
  }
  fmt::print(out, "  {:<38} {:<9} {:>8} {:>10.2f} {:>6.1f}%\n", "(smaller kernels)", "", "", 1e3 * hidden * per_run,
             share(hidden));
  const double outside = runs * run_seconds - in_kernels;
  fmt::print(out,
             "matmul and linear {:.1f}% of the {}, other kernels {:.1f}%, outside kernels (autograd, allocation, glue) "
             "{:.1f}%\n",
             share(matmul), unit, share(in_kernels - matmul), share(outside));
  return {{"kernels", rows}, {"matmul_share", share(matmul) / 100}, {"outside_kernels_share", share(outside) / 100}};
}

}  // namespace loom::tools
