#pragma once
// Ranges for numeric flags, checked by CLI11 before a command runs, with
// messages a person would write: "--log-every: must be at least 1, got 0".
// NaN and text that is not a number are refused by every range.
#include <CLI/CLI.hpp>
#include <limits>

#include "loom/models/option_table.h"

namespace loom::tools {

constexpr double kUnbounded = std::numeric_limits<double>::infinity();

CLI::Validator in_range(const models::Range& range);
// lo <= value <= hi; `below_hi` makes it lo <= value < hi (dropout: below 1).
inline CLI::Validator in_range(double lo, double hi, bool below_hi = false) {
  return in_range(models::Range{.lo = lo, .hi = hi, .below_hi = below_hi});
}
inline CLI::Validator at_least(double lo) { return in_range(lo, kUnbounded); }
// A seed: decimal digits only, 0 to 2^64 - 1 (-1 and 2^64 would wrap to the same seed).
CLI::Validator seed_range();

}  // namespace loom::tools
