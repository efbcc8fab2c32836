#pragma once
// loom::Error: the one exception type library code throws for misuse.
// Messages name the op and what was wrong (both shapes, dtypes or devices).
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <stdexcept>
#include <string>

#include "loom/utf8.h"

namespace loom {

// Its message is UTF-8 whatever it quotes (a damaged file's bytes become \xNN), so that
// a terminal and Python (loom.Error) print it.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(printable_utf8(what)) {}
};

template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) {
  throw Error(fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace loom

// LOOM_CHECK(cond, "op: message {}", arg): throws loom::Error when cond is false.
#define LOOM_CHECK(cond, ...)               \
  do {                                      \
    if (!(cond)) ::loom::fail(__VA_ARGS__); \
  } while (0)
