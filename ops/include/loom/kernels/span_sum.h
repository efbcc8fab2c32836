#pragma once
// Hand-vectorized sums over a contiguous span, for the reductions and the fused
// row kernels. The build has no -ffast-math, so the compiler never reassociates a
// floating-point sum by itself: a plain `total += x[i]` loop runs one add at a
// time. Here the order is chosen explicitly (and so is fixed):
//   - 4 independent accumulators of one 32-byte vector each (8 floats or 4
//     doubles; GCC/Clang vector extensions, one AVX2 register under x86-64-v3),
//   - within fixed blocks of kSpanBlock elements counted from the span's start
//     (float32: each lane adds at most kSpanBlock/32 = 16 values in float),
//   - each block's 4 vectors added together, then lane-wise into double lanes;
//     at the end the double lanes in a fixed tree, then the tail (fewer than 4
//     vectors) one element at a time in double.
// The result depends only on the span's values, never on threads.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <utility>

namespace loom::kernels {

template <typename T>
struct Vec {
  typedef T type __attribute__((vector_size(32)));
  static constexpr int lanes = 32 / static_cast<int>(sizeof(T));
};
template <typename T>
using vec_t = typename Vec<T>::type;

inline constexpr int64_t kSpanBlock = 512;

// Loaders handed to a span function: the same lambda body computes one vector
// of lanes (VecLoad) or one element (ScalarLoad), e.g.
//   [&](int64_t j, auto load) { auto x = load(xr, j); return (x - mu) * (x - mu); }
struct VecLoad {
  template <typename T>
  vec_t<T> operator()(const T* p, int64_t j) const {
    vec_t<T> v;
    std::memcpy(&v, p + j, sizeof v);  // an unaligned vector load
    return v;
  }
};
struct ScalarLoad {
  template <typename T>
  T operator()(const T* p, int64_t j) const {
    return p[j];
  }
};

template <typename T>
inline void store_vec(T* p, vec_t<T> v) {
  std::memcpy(p, &v, sizeof v);
}

// sum over j in [0, n) of f(j, load), in the fixed order described at the top.
template <typename T, typename F>
double span_sum(int64_t n, F&& f) {
  using V = vec_t<T>;
  constexpr int64_t L = Vec<T>::lanes, step = 4 * L;
  using D = vec_t<double>;
  D t0{}, t1{};  // double lanes across blocks (a horizontal sum per block would be a long serial chain)
  int64_t i = 0;
  while (n - i >= step) {
    const int64_t end = i + std::min<int64_t>(kSpanBlock, (n - i) / step * step);
    V a0{}, a1{}, a2{}, a3{};
    for (; i < end; i += step) {
      a0 += f(i, VecLoad{});
      a1 += f(i + L, VecLoad{});
      a2 += f(i + 2 * L, VecLoad{});
      a3 += f(i + 3 * L, VecLoad{});
    }
    V s = (a0 + a1) + (a2 + a3);
    if constexpr (sizeof(T) == 4) {
      t0 += __builtin_convertvector(__builtin_shufflevector(s, s, 0, 1, 2, 3), D);
      t1 += __builtin_convertvector(__builtin_shufflevector(s, s, 4, 5, 6, 7), D);
    } else {
      t0 += s;
    }
  }
  D t = t0 + t1;
  double total = (t[0] + t[1]) + (t[2] + t[3]);
  for (; i < n; ++i) total += f(i, ScalarLoad{});
  return total;
}

// Two sums in one pass: f(j, load) returns a std::pair of values (vectors or
// elements); each sum in span_sum's order with 2 vector accumulators per sum.
template <typename T, typename F>
std::pair<double, double> span_sum2(int64_t n, F&& f) {
  using V = vec_t<T>;
  using D = vec_t<double>;
  constexpr int64_t L = Vec<T>::lanes, step = 2 * L;
  D t[2][2] = {};
  int64_t i = 0;
  while (n - i >= step) {
    const int64_t end = i + std::min<int64_t>(kSpanBlock, (n - i) / step * step);
    V a0{}, a1{}, b0{}, b1{};
    for (; i < end; i += step) {
      auto [x0, y0] = f(i, VecLoad{});
      auto [x1, y1] = f(i + L, VecLoad{});
      a0 += x0, b0 += y0, a1 += x1, b1 += y1;
    }
    const V s[2] = {a0 + a1, b0 + b1};
    for (int k = 0; k < 2; ++k) {
      if constexpr (sizeof(T) == 4) {
        t[k][0] += __builtin_convertvector(__builtin_shufflevector(s[k], s[k], 0, 1, 2, 3), D);
        t[k][1] += __builtin_convertvector(__builtin_shufflevector(s[k], s[k], 4, 5, 6, 7), D);
      } else {
        t[k][0] += s[k];
      }
    }
  }
  double total[2];
  for (int k = 0; k < 2; ++k) {
    D v = t[k][0] + t[k][1];
    total[k] = (v[0] + v[1]) + (v[2] + v[3]);
  }
  for (; i < n; ++i) {
    auto [x, y] = f(i, ScalarLoad{});
    total[0] += x, total[1] += y;
  }
  return {total[0], total[1]};
}

// The plain sum of p[0, n) in that order.
template <typename T>
double span_sum(const T* p, int64_t n) {
  return span_sum<T>(n, [p](int64_t j, auto load) { return load(p, j); });
}

}  // namespace loom::kernels
