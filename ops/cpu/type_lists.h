#pragma once
// The dtypes a CPU kernel file registers its kernels for.
#include <cstdint>

#include "loom/dtype.h"

namespace loom::kernels {

template <typename... Ts>
struct TypeList {};
using FloatingTypes = TypeList<float, double>;
using NumericTypes = TypeList<float, double, int32_t, int64_t>;
using AllTypes = TypeList<float, double, int32_t, int64_t, bool>;
// What copies and casts move: every dtype, bfloat16 included.
using StorageTypes = TypeList<float, double, int32_t, int64_t, bool, bfloat16>;

// register_one(TypeTag<T>{}) for each T of the list.
template <typename... Ts, typename Register>
void for_each_type(TypeList<Ts...>, Register register_one) {
  (register_one(TypeTag<Ts>{}), ...);
}

}  // namespace loom::kernels
