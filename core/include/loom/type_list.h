#pragma once
// Lists of element types, for registering a kernel once per type: the CPU kernels
// (ops/cpu) and the CUDA ones (fmt-free, so .cu files include it too).
#include <cstdint>
#include <type_traits>

#include "loom/bfloat16.h"

namespace loom {

template <typename... Ts>
struct TypeList {};
using FloatingTypes = TypeList<float, double>;
using NumericTypes = TypeList<float, double, int32_t, int64_t>;
using AllTypes = TypeList<float, double, int32_t, int64_t, bool>;
// The elementwise ops' lists (kernels/elementwise_ops.h): bfloat16 as well, its
// values computed in float32 (kernels/functors.h InFloat32).
using FloatingTypesBf16 = TypeList<float, double, bfloat16>;
using NumericTypesBf16 = TypeList<float, double, int32_t, int64_t, bfloat16>;
// What copies and casts move: every dtype, bfloat16 included.
using StorageTypes = TypeList<float, double, int32_t, int64_t, bool, bfloat16>;

template <typename T, typename... Ts>
constexpr bool contains(TypeList<Ts...>) {
  return (std::is_same_v<T, Ts> || ...);
}

}  // namespace loom
