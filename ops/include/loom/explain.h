#pragma once
// `loom explain OP`: an op's formulas and shape rule from its registration, and
// one of its registered samples run in float64 with both Jacobians side by side.
// The numbers are gradcheck's own (jacobian_check), not a second implementation.
#include <optional>
#include <string>
#include <vector>

#include "loom/gradcheck.h"

namespace loom {

struct Explanation {
  const OpInfo* op = nullptr;
  size_t sample = 0;
  std::string sample_label;
  std::vector<Tensor> inputs;
  Tensor output;
  std::optional<JacobianCheck> first;   // absent for a forward-only op
  std::optional<JacobianCheck> second;  // where the op's matrix runs gradgradcheck
};

// The sample with the fewest Jacobian entries (output elements x differentiable
// input elements): the one easiest to read.
size_t smallest_sample(const OpInfo& op);
Explanation explain(const OpInfo& op, size_t sample_index);

struct ExplainFormat {
  int64_t max_rows = 8;  // of each Jacobian shown (all are compared)
  int64_t max_cols = 6;
};
std::string format_explanation(const Explanation& e, const ExplainFormat& format = {});

// Registered op names close to `name` (edit distance, or containing it), best first.
std::vector<std::string> similar_op_names(const std::string& name, size_t limit = 5);
// The op named `name`, or an Error that lists the near matches.
const OpInfo& op_or_error(const std::string& name);

}  // namespace loom
