// `loom explain OP [--sample N] [--full]`: the op's formulas, shape rule and one
// sample's Jacobians, analytic beside numeric (loom/explain.h).
#include <fmt/core.h>

#include "commands.h"
#include "options.h"
#include "loom/explain.h"

namespace loom::tools {

void add_explain_command(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("explain",
                                 "show an op's formulas, shape rule and a float64 gradient check, "
                                 "analytic and numeric Jacobians side by side");
  auto name = std::make_shared<std::string>();
  auto sample = std::make_shared<int64_t>(-1);
  auto full = std::make_shared<bool>(false);
  cmd->add_option("op", *name, "the op (see `loom gradcheck --list`)")->required();
  cmd->add_option("--sample", *sample, "which registered sample to run (default: the smallest)")
      ->check(in_range(0, 1000000));
  cmd->add_flag("--full", *full, "print the whole Jacobians, not their top-left corner");
  cmd->callback([name, sample, full, &exit_code] {
    const OpInfo& op = op_or_error(*name);
    if (*sample >= static_cast<int64_t>(op.samples.size()))
      throw CLI::ValidationError(
          "--sample", fmt::format("{} has {} samples (0 to {})", op.name, op.samples.size(), op.samples.size() - 1));
    size_t index = *sample < 0 ? smallest_sample(op) : static_cast<size_t>(*sample);
    Explanation e = explain(op, index);
    ExplainFormat format;
    if (*full) format.max_rows = format.max_cols = 1 << 20;
    fmt::print("{}", format_explanation(e, format));
    bool failed = (e.first && !e.first->result.passed) || (e.second && !e.second->result.passed);
    if (failed) exit_code = 1;
  });
}

}  // namespace loom::tools
