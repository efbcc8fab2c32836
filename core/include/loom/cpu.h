#pragma once
// Which instruction sets the run-time-dispatched kernels may use. A few kernels
// (dropout's Philox, gelu, the long-row exp-and-sum) are compiled twice, for
// AVX2 (the baseline, x86-64-v3) and for AVX-512, and pick one per call with
// avx512_enabled(): true when the CPU has AVX-512F, unless the environment sets
// LOOM_NO_AVX512=1. set_avx512_enabled() lets a test run both paths on one
// machine (call it outside parallel regions).

// The attribute of a kernel's AVX-512 twin. It adds instruction sets to the
// same -march, so the default-target inline helpers it calls still inline.
#if defined(__x86_64__) && defined(__GNUC__)
#define LOOM_HAS_AVX512_TWIN 1
#define LOOM_TARGET_AVX512 __attribute__((target("avx512f")))
#else
#define LOOM_HAS_AVX512_TWIN 0
#define LOOM_TARGET_AVX512
#endif

namespace loom {

namespace detail {
extern bool g_avx512_enabled;
}

inline bool avx512_enabled() { return detail::g_avx512_enabled; }
// Turns the AVX-512 paths off (or back on, if the CPU has AVX-512); returns the previous setting.
bool set_avx512_enabled(bool enabled);
bool cpu_has_avx512();

}  // namespace loom
