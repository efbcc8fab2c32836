#pragma once
// Element types. float32 trains, float64 checks gradients, int32/int64 index,
// boolean holds masks and comparison results (one byte per element), bfloat16
// carries mixed-precision matmul operands (only ops with a bf16 kernel take it).
#include <cstdint>
#include <string_view>
#include <type_traits>
#include <utility>

#include "loom/bfloat16.h"
#include "loom/error.h"

namespace loom {

enum class DType : uint8_t { f32, f64, i32, i64, b8, bf16 };
inline constexpr int kDTypes = 6;

inline constexpr DType f32 = DType::f32;
inline constexpr DType f64 = DType::f64;
inline constexpr DType i32 = DType::i32;
inline constexpr DType i64 = DType::i64;
inline constexpr DType b8 = DType::b8;
inline constexpr DType bf16 = DType::bf16;

constexpr size_t dtype_size(DType t) {
  switch (t) {
    case DType::f32: return 4;
    case DType::f64: return 8;
    case DType::i32: return 4;
    case DType::i64: return 8;
    case DType::b8: return 1;
    case DType::bf16: return 2;
  }
  return 0;
}

constexpr std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "float32";
    case DType::f64: return "float64";
    case DType::i32: return "int32";
    case DType::i64: return "int64";
    case DType::b8: return "bool";
    case DType::bf16: return "bfloat16";
  }
  return "?";
}

constexpr bool is_floating(DType t) { return t == DType::f32 || t == DType::f64 || t == DType::bf16; }

// PyTorch's kinds of dtype, in promotion order: bool < integer < floating.
enum class DTypeKind : uint8_t { boolean, integer, floating };
constexpr DTypeKind dtype_kind(DType t) {
  if (t == DType::b8) return DTypeKind::boolean;
  return is_floating(t) ? DTypeKind::floating : DTypeKind::integer;
}
// PyTorch's promote_types: the higher kind's dtype; within a kind the wider one
// (bfloat16 with float32 is float32).
constexpr DType promote_types(DType a, DType b) {
  if (a == b) return a;
  if (dtype_kind(a) != dtype_kind(b)) return dtype_kind(a) > dtype_kind(b) ? a : b;
  if (a == DType::f64 || b == DType::f64) return DType::f64;
  return dtype_kind(a) == DTypeKind::floating ? DType::f32 : DType::i64;
}

template <typename T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<float>() {
  return DType::f32;
}
template <>
constexpr DType dtype_of<double>() {
  return DType::f64;
}
template <>
constexpr DType dtype_of<int32_t>() {
  return DType::i32;
}
template <>
constexpr DType dtype_of<int64_t>() {
  return DType::i64;
}
template <>
constexpr DType dtype_of<bool>() {
  return DType::b8;
}
template <>
constexpr DType dtype_of<bfloat16>() {
  return DType::bf16;
}

template <typename T>
struct TypeTag {
  using type = T;
};

// Runs fn(TypeTag<T>{}) for the C++ type behind `t`: dtype dispatch happens once
// per op call, never per element. `op` names the caller in the error message.
// bfloat16 is left out: an op computes on it only through a bf16 kernel.
template <typename Fn>
decltype(auto) dispatch_all(DType t, std::string_view op, Fn&& fn) {
  switch (t) {
    case DType::f32: return fn(TypeTag<float>{});
    case DType::f64: return fn(TypeTag<double>{});
    case DType::i32: return fn(TypeTag<int32_t>{});
    case DType::i64: return fn(TypeTag<int64_t>{});
    case DType::b8: return fn(TypeTag<bool>{});
    case DType::bf16: fail("{}: no kernel for bfloat16 (cast to float32 first)", op);
  }
  fail("{}: unknown dtype", op);
}

// Every dtype, bfloat16 included: for what only moves or converts elements
// (copies and casts, filling, reading values out, printing).
template <typename Fn>
decltype(auto) dispatch_storage(DType t, std::string_view op, Fn&& fn) {
  if (t == DType::bf16) return fn(TypeTag<bfloat16>{});
  return dispatch_all(t, op, std::forward<Fn>(fn));
}

template <typename Fn>
decltype(auto) dispatch_floating(DType t, std::string_view op, Fn&& fn) {
  switch (t) {
    case DType::f32: return fn(TypeTag<float>{});
    case DType::f64: return fn(TypeTag<double>{});
    default: fail("{}: expected float32 or float64, got {}", op, dtype_name(t));
  }
}

// Numeric types (no bool): arithmetic on ints is allowed, on bool it is not.
template <typename Fn>
decltype(auto) dispatch_numeric(DType t, std::string_view op, Fn&& fn) {
  switch (t) {
    case DType::f32: return fn(TypeTag<float>{});
    case DType::f64: return fn(TypeTag<double>{});
    case DType::i32: return fn(TypeTag<int32_t>{});
    case DType::i64: return fn(TypeTag<int64_t>{});
    default: fail("{}: expected a numeric dtype, got {}", op, dtype_name(t));
  }
}

}  // namespace loom
