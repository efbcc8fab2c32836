// CPU kernels of matmul (ops/src/matmul.cpp) for bfloat16 operands: oneDNN's bf16
// gemm (onednn_gemm.h: AVX512-BF16 or AMX where the CPU has them) with float32
// sums, beside a plain reference loop that does the same in float32. The result
// is out's dtype: bfloat16 (the sums rounded once at the end) or float32 (kept:
// bf16 matmul precision's products of operands rounded once, ops/src/matmul.cpp).
// As for float32, transposed operands are read as stored and each product is
// split into blocks fixed by the shape (matmul_blocks.h), each a single-threaded
// gemm inside loom's OpenMP loop, so the bits do not depend on the thread count.
// The linear op's kernel adds its bias to each block as the block's gemm finishes
// it, as matmul.cpp's float32 one does (a bfloat16 result: before its rounding).
#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <vector>

#include "loom/autograd.h"
#include "loom/kernel_table.h"
#include "loom/ops.h"
#include "loom/ops/kernel_signatures.h"
#include "matmul_blocks.h"
#include "onednn_gemm.h"
#include "row_loops.h"

namespace loom {

namespace {

using detail::element_at;
using detail::GemmOperand;

// Below this many multiply-adds a block (attention's per-head products, in mixed
// precision) is multiplied by sgemm on its operands widened to float32: a product
// of two bfloat16 values is exact in float32 and the sums are float32, the same
// arithmetic, while oneDNN's bf16 primitive costs more to start than such a product
// (matmul.cpp keeps float32 ones below the same size for the same reason).
constexpr int64_t kSmallBf16Product = int64_t{1} << 17;

// An operand as stored (rows x cols, row stride ld) widened into a dense buffer (row stride cols).
const float* widened_operand(const bfloat16* x, int64_t rows, int64_t cols, int64_t ld, std::vector<float>& buffer) {
  buffer.resize(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) buffer[static_cast<size_t>(r * cols + c)] = x[r * ld + c];
  return buffer.data();
}

// c (dense, m x n) = op(a) @ op(b) in float32 sums.
void float32_sums(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const bfloat16* a, int64_t lda, const bfloat16* b,
                  int64_t ldb, float* c) {
  if (m * n * k >= kSmallBf16Product) return onednn::gemm_bf16(ta, tb, m, n, k, a, lda, b, ldb, c, n);
  thread_local std::vector<float> wide_a, wide_b;
  const float* fa = widened_operand(a, ta ? k : m, ta ? m : k, lda, wide_a);
  const float* fb = widened_operand(b, tb ? n : k, tb ? k : n, ldb, wide_b);
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, static_cast<int>(m),
              static_cast<int>(n), static_cast<int>(k), 1.0f, fa, static_cast<int>(ta ? m : k), fb,
              static_cast<int>(tb ? k : n), 0.0f, c, static_cast<int>(n));
}

// One block: c (row stride ldc) = op(a) @ op(b), float32 sums stored as Out. A
// bfloat16 block adds its bias (the block's first column's, or null) to the sums
// before their one rounding; a float32 one is given its bias by the caller.
template <typename Out>
void block_gemm(const GemmOperand& la, const GemmOperand& lb, int64_t m, int64_t n, int64_t k, const bfloat16* a,
                const bfloat16* b, Out* c, int64_t ldc, const float* bias) {
  const bool ta = la.trans == CblasTrans, tb = lb.trans == CblasTrans;
  if constexpr (std::is_same_v<Out, float>) {
    onednn::gemm_bf16(ta, tb, m, n, k, a, la.ld, b, lb.ld, c, ldc);
  } else {
    thread_local std::vector<float> sums;
    sums.resize(static_cast<size_t>(m * n));
    float32_sums(ta, tb, m, n, k, a, la.ld, b, lb.ld, sums.data());
    for (int64_t i = 0; i < m; ++i) {  // each sum rounded once as it is stored
      const float* row = sums.data() + i * n;
      Out* to = c + i * ldc;
      if (bias) {
#pragma omp simd
        for (int64_t j = 0; j < n; ++j) to[j] = row[j] + bias[j];
      } else {
#pragma omp simd
        for (int64_t j = 0; j < n; ++j) to[j] = row[j];
      }
    }
  }
}

template <typename Out>
void onednn_matmul(const Tensor& out, const Tensor& a_view, const Tensor& b_view, const float* bias = nullptr) {
  const int64_t nd = out.dim(), m = out.shape()[nd - 2], n = out.shape()[nd - 1], k = a_view.shape()[nd - 1];
  if (out.numel() == 0) return;
  Out* pc = static_cast<Out*>(out.raw_data());
  if (k == 0) {  // empty sums
    for (int64_t i = 0; i < out.numel(); ++i) pc[i] = Out(bias ? 0.0f + bias[i % n] : 0.0f);
    return;
  }
  Tensor a = a_view, b = b_view;
  const GemmOperand la = detail::gemm_operand(a), lb = detail::gemm_operand(b);
  const Shape batch(out.shape().begin(), out.shape().end() - 2);
  const Shape a_batch_strides(a.strides().begin(), a.strides().end() - 2);
  const Shape b_batch_strides(b.strides().begin(), b.strides().end() - 2);
  const auto* pa = static_cast<const bfloat16*>(a.raw_data());
  const auto* pb = static_cast<const bfloat16*>(b.raw_data());
  const detail::ProductBlocks split = detail::product_blocks(m, n);
#pragma omp parallel for schedule(static)
  for (int64_t item = 0; item < shape_numel(batch) * split.count; ++item) {
    const int64_t bi = item / split.count, block = item % split.count;
    const bfloat16* A = pa + strided_offset(bi, batch, a_batch_strides);
    const bfloat16* B = pb + strided_offset(bi, batch, b_batch_strides);
    Out* C = pc + bi * m * n;
    const int64_t start = split.start(block), count = split.length(block, m, n);
    const float* block_bias = bias && !split.split_rows ? bias + start : bias;
    if (split.split_rows)
      block_gemm(la, lb, count, n, k, element_at(A, la.trans, la.ld, start, 0), B, C + start * n, n, block_bias);
    else
      block_gemm(la, lb, m, count, k, A, element_at(B, lb.trans, lb.ld, 0, start), C + start, n, block_bias);
    if constexpr (std::is_same_v<Out, float>) detail::add_bias_to_block(split, C, start, count, m, n, bias);
  }
}

// The plain reference: float32 sums of bf16 products, stored as Out.
template <typename Out>
void reference_bf16_matmul(const Tensor& out, const Tensor& a, const Tensor& b, const float* bias = nullptr) {
  const int64_t nd = out.dim(), m = out.shape()[nd - 2], n = out.shape()[nd - 1], k = a.shape()[nd - 1];
  const Shape batch(out.shape().begin(), out.shape().end() - 2);
  const Shape a_batch_strides(a.strides().begin(), a.strides().end() - 2);
  const Shape b_batch_strides(b.strides().begin(), b.strides().end() - 2);
  const auto* pa = static_cast<const bfloat16*>(a.raw_data());
  const auto* pb = static_cast<const bfloat16*>(b.raw_data());
  auto* pc = static_cast<Out*>(out.raw_data());
  const int64_t sam = a.strides()[nd - 2], sak = a.strides()[nd - 1];
  const int64_t sbk = b.strides()[nd - 2], sbn = b.strides()[nd - 1];
  for (int64_t bi = 0; bi < shape_numel(batch); ++bi) {
    const bfloat16* A = pa + strided_offset(bi, batch, a_batch_strides);
    const bfloat16* B = pb + strided_offset(bi, batch, b_batch_strides);
    Out* C = pc + bi * m * n;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        float acc = 0;
        for (int64_t p = 0; p < k; ++p) acc += float(A[i * sam + p * sak]) * float(B[p * sbk + j * sbn]);
        C[i * n + j] = Out(bias ? acc + bias[j] : acc);
      }
  }
}

// The result's dtype picks the instantiation: bfloat16, or float32 sums kept.
void matmul_reference(const Tensor& out, const Tensor& a, const Tensor& b) {
  out.dtype() == DType::f32 ? reference_bf16_matmul<float>(out, a, b) : reference_bf16_matmul<bfloat16>(out, a, b);
}
// A CPU without bf16 gemms (no AVX512-BF16 or AMX, as oneDNN sees it) has no
// primitive to build: bfloat16 tensors are multiplied by the reference loop there.
void matmul_fast(const Tensor& out, const Tensor& a, const Tensor& b) {
  if (!onednn::bf16_available()) return matmul_reference(out, a, b);
  out.dtype() == DType::f32 ? onednn_matmul<float>(out, a, b) : onednn_matmul<bfloat16>(out, a, b);
}

// The linear op on bfloat16 operands: in bf16 matmul precision (ops/cpu/matmul_rounded_once.cpp)
// x and w_t rounded from float32, with a float32 bias and result; in mixed precision
// all bfloat16, the bias (widened as layer norm's parameters are) added to the float32
// sums before their one rounding.
void linear_reference(const Tensor& out, const Tensor& x, const Tensor& w_t, const Tensor& bias) {
  if (out.dtype() == DType::f32) return reference_bf16_matmul<float>(out, x, w_t, bias.data<float>());
  reference_bf16_matmul<bfloat16>(out, x, w_t, detail::ParamData<bfloat16>(bias).get());
}
void linear_fast(const Tensor& out, const Tensor& x, const Tensor& w_t, const Tensor& bias) {
  if (!onednn::bf16_available()) return linear_reference(out, x, w_t, bias);
  if (out.dtype() == DType::f32) return onednn_matmul<float>(out, x, w_t, bias.data<float>());
  onednn_matmul<bfloat16>(out, x, w_t, detail::ParamData<bfloat16>(bias).get());
}

}  // namespace

LOOM_KERNELS(cpu_matmul_bf16) {
  register_kernel<kernels::MatmulKernel>("matmul", DeviceType::cpu, DType::bf16, matmul_fast, matmul_reference);
  register_kernel<kernels::LinearKernel>("linear", DeviceType::cpu, DType::bf16, linear_fast, linear_reference);
}

}  // namespace loom
