#pragma once
// Small helpers shared by the test suites.
#include <functional>
#include <string>

#include "loom/error.h"

namespace loom::testing {

// The message of the loom::Error that fn throws, or "(no error)".
inline std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace loom::testing
