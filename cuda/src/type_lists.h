#pragma once
// The element types the CUDA kernels are compiled for (fmt-free: .cu files
// include no loom/dtype.h). ElementType mirrors loom::DType's order
// (checked in elementwise.cpp).
#include <cstdint>
#include <type_traits>

#include "loom/bfloat16.h"  // constexpr, no fmt: device code converts with the CPU's rounding
#include "loom/type_list.h"

namespace loom::cuda {

// Short names for the lists (loom/type_list.h) in the kernel tables (elementwise_ops.h).
using Floating = FloatingTypes;
using Numeric = NumericTypes;
using All = AllTypes;

// bfloat16 is a storage type: copied and converted, multiplied by cuBLAS, and
// computed on in float32 by the elementwise kernels (functors.h InFloat32), as on the CPU.

// M(T) for each type of All: explicit instantiations in the .cu files.
#define LOOM_CUDA_FOR_EACH_TYPE(M) M(float) M(double) M(int32_t) M(int64_t) M(bool)

enum class ElementType : int { f32, f64, i32, i64, b8, bf16 };

// fn(type_identity<T>) for the C++ type behind `type`.
template <typename Fn>
void dispatch_element_type(ElementType type, Fn&& fn) {
  switch (type) {
    case ElementType::f32: return fn(std::type_identity<float>{});
    case ElementType::f64: return fn(std::type_identity<double>{});
    case ElementType::i32: return fn(std::type_identity<int32_t>{});
    case ElementType::i64: return fn(std::type_identity<int64_t>{});
    case ElementType::b8: return fn(std::type_identity<bool>{});
    case ElementType::bf16: return fn(std::type_identity<bfloat16>{});
  }
}

}  // namespace loom::cuda
