#include "loom/cpu.h"

#include <cstdlib>
#include <cstring>

namespace loom {

bool cpu_has_avx512() {
#if LOOM_HAS_AVX512_TWIN
  static const bool has = [] {
    __builtin_cpu_init();  // may run from a static initializer, before libgcc's own
    return __builtin_cpu_supports("avx512f");
  }();
  return has;
#else
  return false;
#endif
}

namespace detail {
namespace {
bool initial_avx512() {
  const char* off = std::getenv("LOOM_NO_AVX512");
  return cpu_has_avx512() && !(off && std::strcmp(off, "0") != 0 && *off != '\0');
}
}  // namespace
bool g_avx512_enabled = initial_avx512();
}  // namespace detail

bool set_avx512_enabled(bool enabled) {
  const bool previous = detail::g_avx512_enabled;
  detail::g_avx512_enabled = enabled && cpu_has_avx512();
  return previous;
}

}  // namespace loom
