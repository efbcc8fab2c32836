#pragma once
// Registering a CPU kernel for each dtype of a list (loom/type_list.h).
#include <cstdint>

#include "loom/dtype.h"
#include "loom/type_list.h"

namespace loom::kernels {

// register_one(TypeTag<T>{}) for each T of the list.
template <typename... Ts, typename Register>
void for_each_type(TypeList<Ts...>, Register register_one) {
  (register_one(TypeTag<Ts>{}), ...);
}

}  // namespace loom::kernels
