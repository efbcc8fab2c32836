// `loom gradcheck [OP...] [--device standin|cuda] [--fast]`: runs the registry's test matrix and prints a table.
#include <fmt/core.h>

#include "commands.h"
#include "loom/backend.h"
#include "loom/gradcheck.h"
#include "loom/registry.h"
#include "loom/standin.h"

namespace loom::tools {

void add_gradcheck_command(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("gradcheck", "check every op's gradients in float64 against finite differences");
  auto ops = std::make_shared<std::vector<std::string>>();
  auto list = std::make_shared<bool>(false);
  auto failures_only = std::make_shared<bool>(false);
  auto fast = std::make_shared<bool>(false);
  auto device = std::make_shared<std::string>("cpu");
  cmd->add_option("ops", *ops, "ops to check (default: all registered)");
  cmd->add_flag("--list", *list, "list the registered ops and exit");
  cmd->add_flag("--failures", *failures_only, "print only failing rows");
  cmd->add_flag("--fast", *fast,
                "PyTorch's fast mode: one random projection v.J.u per input instead of whole Jacobians");
  cmd->add_option("--device", *device,
                  "also run every op on this device and compare with the CPU (the 'device' rows): standin "
                  "(memory only kernels may touch, in any build) or cuda")
      ->check(CLI::IsMember({"cpu", "standin", "cuda"}));
  cmd->callback([ops, list, failures_only, fast, device, &exit_code] {
    // standin: enabled here; cuda: a one-line error when the build or the machine has none.
    if (*device != "cpu") parse_device(*device);
    if (*list) {
      for (const auto& op : registered_ops())
        fmt::print("{:<16} {} samples{}{}\n", op.name, op.samples.size(),
                   op.differentiable ? "" : "  (not differentiable)", op.composed ? "  (fused: has composition)" : "");
      return;
    }
    std::vector<const OpInfo*> selected;
    if (ops->empty()) {
      for (const auto& op : registered_ops()) selected.push_back(&op);
    } else {
      for (const auto& name : *ops) {
        const OpInfo* op = find_op(name);
        // A bad command line: main prints it as every other one (exit code 2).
        if (!op)
          throw CLI::ValidationError("gradcheck", fmt::format("no op named '{}' (see `loom gradcheck --list`)", name));
        selected.push_back(op);
      }
    }
    const GradcheckOptions tol{.fast_mode = *fast};
    fmt::print("float64, central differences eps={:g}; pass: |analytic-numeric| <= {:g}{} + {:g}*|numeric|{}\n\n",
               tol.eps, tol.atol, *fast ? "*sum(u)*sum(v)" : "", tol.rtol,
               *fast ? " of v.J.u, u a random unit vector per input, v random output weights" : "");
    fmt::print("{:<30} {:<34} {:<14} {:>12} {:>12}  {}\n", "op", "sample", "check", "max abs err", "max rel err",
               "result");
    int passed = 0, failed = 0;
    for (const OpInfo* op : selected) {
      for (const CheckResult& r : check_op(*op, tol)) {
        r.passed ? ++passed : ++failed;
        if (*failures_only && r.passed) continue;
        fmt::print("{:<30} {:<34} {:<14} {:>12.3e} {:>12.3e}  {}{}\n", r.op, r.sample, r.check, r.max_abs_error,
                   r.max_rel_error, r.passed ? "pass" : "FAIL", r.passed ? "" : "  " + r.message);
      }
    }
    fmt::print("\n{} ops: {} passed, {} failed\n", selected.size(), passed, failed);
    if (failed) exit_code = 1;
  });
}

}  // namespace loom::tools
