#pragma once
// The two halves dropout_add_layer_norm's CPU kernels are made of, each the very loop
// of the op it stands for (so the fused op gives their bits): dropout's keep-and-scale
// with the residual added (ops/cpu/dropout.cpp) and layer norm's rows
// (ops/cpu/layer_norm.cpp). Fast and reference, float, double and bfloat16.
#include <cstdint>

#include "loom/ops/kernel_signatures.h"
#include "row_loops.h"

namespace loom::detail {

// h = x + keep * s / (1 - p), the keep bits to mask: dropout(s) then add, in one pass.
template <typename T>
void dropout_add_fast(T* h, uint32_t* mask, const T* x, const T* s, int64_t n, kernels::DropoutDraw draw);
template <typename T>
void dropout_add_reference(T* h, uint32_t* mask, const T* x, const T* s, int64_t n, kernels::DropoutDraw draw);

// out = layer_norm(x, w, b, eps) row by row, (mean, rstd) to stats; w, b may be null.
// Statistics, weight and bias in compute_type<T> (float32 for bfloat16).
template <typename T, typename C = compute_type<T>>
void layer_norm_rows_fast(T* out, C* stats, const T* x, const C* w, const C* b, RowShape s, double eps);
template <typename T, typename C = compute_type<T>>
void layer_norm_rows_reference(T* out, C* stats, const T* x, const C* w, const C* b, RowShape s, double eps);

}  // namespace loom::detail
