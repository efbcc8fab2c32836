// CPU kernels of matmul (ops/src/matmul.cpp): BLAS gemms beside the plain
// reference triple loop, a teaching pair. A transposed operand is passed to the
// gemm as transposed (no copy); batches and row (or column) blocks of each
// product run in one OpenMP loop of single-threaded gemms. Which gemm multiplies
// a block: float64, OpenBLAS's dgemm; float32, oneDNN's gemm where it has AVX-512
// code (OpenBLAS's sgemm otherwise, and for small blocks), the skinny kernel
// (skinny_matmul.h) for X @ W^T with X in cache (a Linear's, few rows) on CPUs
// with AVX-512, or its tiny kernels for products too small for a gemm call (at
// most kTinyProduct multiply-adds). A float32 X @ W^T whose W a PackedWeights
// guard packed (decoding's weights) is not split into
// blocks: the packed kernel (packed_matmul.h) takes it whole (in bf16 precision,
// by the weight's bfloat16 copy where it has one). In bf16 matmul
// precision (loom/matmul_precision.h) each float32 block of a product that is not
// tiny (in_bf16) is rounded to bfloat16 (bf16_rounding.h) and multiplied by
// oneDNN's bf16 gemm instead; the reference rounds the same way. The linear op's
// kernel is the same product with its bias added to each block as it is finished.
#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <bit>
#include <type_traits>
#include <vector>

#include "loom/autograd.h"
#include "loom/kernel_table.h"
#include "loom/matmul_precision.h"
#include "bf16_rounding.h"
#include "matmul_blocks.h"
#include "onednn_gemm.h"
#include "packed_matmul.h"
#include "skinny_matmul.h"
#include "loom/ops/kernel_signatures.h"
#include "type_lists.h"
#include "loom/ops.h"

namespace loom {

namespace {

using detail::element_at;
using detail::GemmOperand;

template <typename T>
void gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda, const T* b,
          int64_t ldb, T* c, int64_t ldc) {
  if constexpr (std::is_same_v<T, float>)
    cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c, ldc);
  else
    cblas_dgemm(CblasRowMajor, ta, tb, m, n, k, 1.0, a, lda, b, ldb, 0.0, c, ldc);
}

// Below this many multiply-adds a oneDNN call costs more than its arithmetic
// (`loom bench ops --filter matmul`'s attention products): such a float32 block runs on
// sgemm, and such a bf16 block multiplies its bfloat16-rounded operands, held in
// float32, with sgemm. A product of two bfloat16
// values is exact in float32 and the sums are float32, so it is the same arithmetic.
constexpr int64_t kSmallOnednnProduct = 1 << 17;

// Whether an m x k @ k x n product (each of a batch's) runs in bf16: float32
// operands, bf16 precision asked for, a CPU that has the instructions, and a
// product of at least kSmallOnednnProduct multiply-adds. Smaller ones (attention's
// per-head products) stay float32: rounding their operands takes longer than the
// product (`loom bench step --precision bf16 --profile`), and float32 is the more
// exact of the two.
template <typename T>
bool in_bf16(int64_t m, int64_t n, int64_t k) {
  return std::is_same_v<T, float> && matmul_precision() == MatmulPrecision::bf16 && onednn::bf16_available() &&
         m * n * k >= kSmallOnednnProduct;
}

// A float32 operand as stored (rows x cols with row stride ld), rounded to bfloat16
// (bf16_rounding.h) into a dense per-thread buffer; returns the buffer (row stride
// cols). Element is bfloat16, or float for bfloat16 values held exactly in float32.
template <typename Element>
const Element* rounded_to_bf16(const float* data, int64_t rows, int64_t cols, int64_t ld,
                               std::vector<Element>& buffer) {
  buffer.resize(static_cast<size_t>(rows * cols));
  if constexpr (std::is_same_v<Element, bfloat16>) {
    detail::round_rows_to_bf16(data, rows, cols, ld, buffer.data());
  } else {
    for (int64_t r = 0; r < rows; ++r)
#pragma omp simd
      for (int64_t c = 0; c < cols; ++c) buffer[r * cols + c] = static_cast<float>(bfloat16(data[r * ld + c]));
  }
  return buffer.data();
}

// One block's product in bf16: both operands rounded as stored (a transposed one
// stays transposed), then oneDNN's bf16 gemm with float32 sums.
void gemm_bf16(const GemmOperand& la, const GemmOperand& lb, int64_t m, int64_t n, int64_t k, const float* a,
               const float* b, float* c, int64_t ldc) {
  const bool ta = la.trans == CblasTrans, tb = lb.trans == CblasTrans;
  const int64_t a_rows = ta ? k : m, a_cols = ta ? m : k, b_rows = tb ? n : k, b_cols = tb ? k : n;
  if (m * n * k < kSmallOnednnProduct) {
    thread_local std::vector<float> a32, b32;
    const float* pa = rounded_to_bf16(a, a_rows, a_cols, la.ld, a32);
    const float* pb = rounded_to_bf16(b, b_rows, b_cols, lb.ld, b32);
    cblas_sgemm(CblasRowMajor, la.trans, lb.trans, m, n, k, 1.0f, pa, a_cols, pb, b_cols, 0.0f, c, ldc);
    return;
  }
  thread_local std::vector<bfloat16> a16, b16;
  const bfloat16* pa = rounded_to_bf16(a, a_rows, a_cols, la.ld, a16);
  const bfloat16* pb = rounded_to_bf16(b, b_rows, b_cols, lb.ld, b16);
  onednn::gemm_bf16(ta, tb, m, n, k, pa, a_cols, pb, b_cols, c, ldc);
}

// One product's blocks (as blas_matmul splits them) in bf16, from operands rounded
// once up front in parallel: the same values and blocks as rounding per block.
void bf16_blocks(const GemmOperand& la, const GemmOperand& lb, int64_t m, int64_t n, int64_t k, const float* a,
                 const float* b, float* c, const detail::ProductBlocks& split, const float* bias) {
  const bool ta = la.trans == CblasTrans, tb = lb.trans == CblasTrans;
  const int64_t a_rows = ta ? k : m, a_cols = ta ? m : k, b_rows = tb ? n : k, b_cols = tb ? k : n;
  static thread_local std::vector<bfloat16> a16, b16;  // the calling thread's, reused by every product
  a16.resize(static_cast<size_t>(a_rows * a_cols));
  b16.resize(static_cast<size_t>(b_rows * b_cols));
  // Pointers, not the buffers: inside the parallel region a thread_local names each thread's own.
  bfloat16* const pa = a16.data();
  bfloat16* const pb = b16.data();
#pragma omp parallel
  {
#pragma omp for schedule(static) nowait
    for (int64_t r = 0; r < a_rows; ++r) detail::round_rows_to_bf16(a + r * la.ld, 1, a_cols, la.ld, pa + r * a_cols);
#pragma omp for schedule(static)
    for (int64_t r = 0; r < b_rows; ++r) detail::round_rows_to_bf16(b + r * lb.ld, 1, b_cols, lb.ld, pb + r * b_cols);
#pragma omp for schedule(static)
    for (int64_t block = 0; block < split.count; ++block) {
      const int64_t start = split.start(block), count = split.length(block, m, n);
      if (split.split_rows)
        onednn::gemm_bf16(ta, tb, count, n, k, element_at(pa, la.trans, a_cols, start, 0), a_cols, pb, b_cols,
                          c + start * n, n);
      else
        onednn::gemm_bf16(ta, tb, m, count, k, pa, a_cols, element_at(pb, lb.trans, b_cols, 0, start), b_cols,
                          c + start, n);
      detail::add_bias_to_block(split, c, start, count, m, n, bias);
    }
  }
}

// The plain reference: three loops per batch, reading through the strides (in
// bf16 precision, with each operand rounded to bfloat16 and float32 sums), and the
// linear op's bias, if any, added to each sum.
template <typename T>
void reference_matmul(const Tensor& out, const Tensor& a, const Tensor& b, const Shape& batch,
                      const T* bias = nullptr) {
  int64_t nd = out.dim(), m = out.shape()[nd - 2], n = out.shape()[nd - 1], k = a.shape()[a.dim() - 1];
  const T* pa = static_cast<const T*>(a.raw_data());
  const T* pb = static_cast<const T*>(b.raw_data());
  T* pc = static_cast<T*>(out.raw_data());
  Shape a_batch_strides(a.strides().begin(), a.strides().end() - 2);
  Shape b_batch_strides(b.strides().begin(), b.strides().end() - 2);
  int64_t sam = a.strides()[a.dim() - 2], sak = a.strides()[a.dim() - 1];
  int64_t sbk = b.strides()[b.dim() - 2], sbn = b.strides()[b.dim() - 1];
  const bool bf16 = in_bf16<T>(m, n, k);
  auto rounded = [bf16](T x) { return bf16 ? static_cast<T>(static_cast<float>(bfloat16(static_cast<float>(x)))) : x; };
  for (int64_t bi = 0; bi < shape_numel(batch); ++bi) {
    const T* A = pa + strided_offset(bi, batch, a_batch_strides);
    const T* B = pb + strided_offset(bi, batch, b_batch_strides);
    T* C = pc + bi * m * n;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        T acc = 0;
        for (int64_t p = 0; p < k; ++p) acc += rounded(A[i * sam + p * sak]) * rounded(B[p * sbk + j * sbn]);
        C[i * n + j] = bias ? acc + bias[j] : acc;
      }
  }
}

// With a bias (the linear op's, n values), each block gets it added as soon as
// its gemm has written it, while it is in cache.
template <typename T>
void blas_matmul(const Tensor& out, Tensor a, Tensor b, const Shape& batch, const T* bias = nullptr) {
  int64_t nd = out.dim(), m = out.shape()[nd - 2], n = out.shape()[nd - 1], k = a.shape()[a.dim() - 1];
  const GemmOperand la = detail::gemm_operand(a), lb = detail::gemm_operand(b);
  const T* pa = static_cast<const T*>(a.raw_data());
  const T* pb = static_cast<const T*>(b.raw_data());
  T* pc = static_cast<T*>(out.raw_data());
  Shape a_batch_strides(a.strides().begin(), a.strides().end() - 2);
  Shape b_batch_strides(b.strides().begin(), b.strides().end() - 2);
  int64_t batches = shape_numel(batch);
  if (batches == 0 || m == 0 || n == 0) return;
  if (k == 0) {
    std::fill(pc, pc + batches * m * n, T(0));
    if (bias) detail::add_bias(pc, n, batches * m, n, bias);
    return;
  }
  // Work items are (batch, block of output rows or columns), each computed by a
  // single-threaded gemm (OpenBLAS runs on one thread inside an OpenMP region).
  const detail::ProductBlocks split = detail::product_blocks(m, n);
  const int64_t blocks = split.count;
  const T* a_base = pa;
  const T* b_base = pb;
  const bool bf16 = in_bf16<T>(m, n, k);
  if constexpr (std::is_same_v<T, float>) {
    // A weight packed for decoding: the whole product at once, any m, so a row's
    // bits never depend on the other rows (packed_matmul.h). b is then W^T, strides
    // (1, W's row stride); read from b itself, since gemm_operand calls a one-row
    // or one-column W^T untransposed.
    const int64_t b_row_stride = b.strides()[b.dim() - 2], b_column_stride = b.strides()[b.dim() - 1];
    // In bf16 precision its bfloat16 copy, if it has that one, at any m (again so
    // that a row's bits never depend on the other rows).
    if (batches == 1 && la.trans == CblasNoTrans && b_row_stride == 1)
      if (const auto packed = detail::packed_weight_of(pb, n, k, b_column_stride)) {
        if (matmul_precision() == MatmulPrecision::bf16 && !packed->bf16_pairs.empty())
          return detail::packed_matmul_bf16(m, pa, la.ld, *packed, pc, n, bias);
        if (!bf16 && !packed->panels.empty()) return detail::packed_matmul(m, pa, la.ld, *packed, pc, n, bias);
      }
    // One large product in bf16 (a Linear's): each operand is rounded once, by all
    // threads, rather than the shared one again for every block.
    const int64_t block_product = std::min(m, split.size) * std::min(n, split.size) * k;
    if (bf16 && batches == 1 && blocks > 1 && block_product >= kSmallOnednnProduct)
      return bf16_blocks(la, lb, m, n, k, pa, pb, pc, split, bias);
  }
  auto block_gemm = [&](int64_t bm, int64_t bn, const T* A, const T* B, T* C) {
    if constexpr (std::is_same_v<T, float>) {
      if (bf16) return gemm_bf16(la, lb, bm, bn, k, A, B, C, n);
      // X @ W^T with X small enough to stay in cache: dot products, no packing.
      if (la.trans == CblasNoTrans && lb.trans == CblasTrans && bm * k <= detail::kSkinnyRowFloats &&
          detail::skinny_matmul_available())
        return detail::skinny_matmul(bm, bn, k, A, la.ld, B, lb.ld, C, n);
      // A tiny product (decoding's attention, one query per head or a sentence's
      // beams' queries): computed in place, no gemm call.
      if (detail::tiny_product(bm, bn, k) && la.trans == CblasNoTrans)
        return lb.trans == CblasTrans ? detail::tiny_matmul_transposed(bm, bn, k, A, la.ld, B, lb.ld, C, n)
                                      : detail::tiny_matmul(bm, bn, k, A, la.ld, B, lb.ld, C, n);
      // Where oneDNN has AVX-512 code its float32 gemm beats OpenBLAS's per block
      // (docs/benchmarks.md: most under an AVX2 OPENBLAS_CORETYPE); tiny products
      // stay with sgemm, which starts faster.
      if (bm * bn * k >= kSmallOnednnProduct && onednn::f32_avx512_available())
        return onednn::gemm_f32(la.trans == CblasTrans, lb.trans == CblasTrans, bm, bn, k, A, la.ld, B, lb.ld, C, n);
    }
    gemm<T>(la.trans, lb.trans, bm, bn, k, A, la.ld, B, lb.ld, C, n);
  };
  auto work = [&](int64_t item) {
    int64_t bi = item / blocks, block = item % blocks;
    const T* A = a_base + strided_offset(bi, batch, a_batch_strides);
    const T* B = b_base + strided_offset(bi, batch, b_batch_strides);
    T* C = pc + bi * m * n;
    int64_t start = split.start(block), count = split.length(block, m, n);
    auto at = [](const T* base, const GemmOperand& op, int64_t i, int64_t j) {
      return element_at(base, op.trans, op.ld, i, j);
    };
    if (split.split_rows)
      block_gemm(count, n, at(A, la, start, 0), B, C + start * n);
    else
      block_gemm(m, count, A, at(B, lb, 0, start), C + start);
    detail::add_bias_to_block(split, C, start, count, m, n, bias);
  };
  const int64_t items = batches * blocks;
  // Always inside a parallel region, even for one item: outside one, OpenBLAS would
  // use its own threads and its thread-count-dependent split.
#pragma omp parallel for schedule(static)
  for (int64_t item = 0; item < items; ++item) work(item);
}

// The batch dims: out's shape without its last two.
Shape batch_of(const Tensor& out) { return Shape(out.shape().begin(), out.shape().end() - 2); }

template <typename T>
void matmul_fast(const Tensor& out, const Tensor& a, const Tensor& b) {
  blas_matmul<T>(out, a, b, batch_of(out));
}
template <typename T>
void matmul_reference(const Tensor& out, const Tensor& a, const Tensor& b) {
  reference_matmul<T>(out, a, b, batch_of(out));
}

// The linear op (ops/src/linear.cpp): 2-D x @ w_t with the bias added to each block.
template <typename T>
void linear_fast(const Tensor& out, const Tensor& x, const Tensor& w_t, const Tensor& bias) {
  blas_matmul<T>(out, x, w_t, {}, bias.data<T>());
}
template <typename T>
void linear_reference(const Tensor& out, const Tensor& x, const Tensor& w_t, const Tensor& bias) {
  reference_matmul<T>(out, x, w_t, {}, bias.data<T>());
}

template <typename T>
void register_for() {
  register_kernel<kernels::MatmulKernel>("matmul", DeviceType::cpu, dtype_of<T>(), matmul_fast<T>, matmul_reference<T>);
  register_kernel<kernels::LinearKernel>("linear", DeviceType::cpu, dtype_of<T>(), linear_fast<T>, linear_reference<T>);
}

}  // namespace

LOOM_KERNELS(cpu_matmul) {
  kernels::for_each_type(FloatingTypes{}, [](auto tag) { register_for<typename decltype(tag)::type>(); });
}

}  // namespace loom
