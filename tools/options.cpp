#include "options.h"

#include <fmt/core.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>

namespace loom::tools {

CLI::Validator in_range(const models::Range& range) {
  const std::string expected = range.describe();
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        char* end = nullptr;
        const double value = std::strtod(text.c_str(), &end);
        if (text.empty() || end != text.c_str() + text.size() || std::isnan(value))
          return fmt::format("must be a number, {}; got '{}'", expected, text);
        if (!range.contains(value)) return fmt::format("must be {}, got {}", expected, text);
        return "";
      },
      expected);
}

CLI::Validator seed_range() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        const bool digits = !text.empty() && text.find_first_not_of("0123456789") == std::string::npos;
        errno = 0;
        if (digits) std::strtoull(text.c_str(), nullptr, 10);
        if (!digits || errno == ERANGE)
          return fmt::format("must be a whole number from 0 to 18446744073709551615, got '{}'", text);
        return "";
      },
      "0 to 2^64 - 1");
}

}  // namespace loom::tools
