// CPU kernels of matmul (ops/src/matmul.cpp) for bfloat16 operands: oneDNN's bf16
// gemm (onednn_gemm.h: AVX512-BF16 or AMX where the CPU has them) with float32
// sums, rounded once to bfloat16 at the end, beside a plain reference loop that
// does the same in float32. As for float32, each product is split into row blocks
// of a size fixed by the shape, each a single-threaded gemm inside loom's OpenMP
// loop, so the bits do not depend on the thread count.
#include <omp.h>

#include <algorithm>
#include <vector>

#include "loom/autograd.h"
#include "loom/kernel_table.h"
#include "loom/ops.h"
#include "loom/ops/kernel_signatures.h"
#include "onednn_gemm.h"

namespace loom {

namespace {

void onednn_matmul(const Tensor& out, const Tensor& a_view, const Tensor& b_view) {
  const int64_t nd = out.dim(), m = out.shape()[nd - 2], n = out.shape()[nd - 1], k = a_view.shape()[nd - 1];
  if (out.numel() == 0) return;
  const int64_t batch = out.numel() / (m * n);
  if (k == 0) {  // empty sums
    std::fill_n(static_cast<bfloat16*>(out.raw_data()), out.numel(), bfloat16(0.0f));
    return;
  }
  Tensor a, b;
  {
    NoGradGuard no_grad;  // broadcast or transposed operands become dense (a kernel internal)
    a = contiguous(a_view);
    b = contiguous(b_view);
  }
  const auto* pa = static_cast<const bfloat16*>(a.raw_data());
  const auto* pb = static_cast<const bfloat16*>(b.raw_data());
  auto* pc = static_cast<bfloat16*>(out.raw_data());
  constexpr int64_t kRows = 256;  // rows per block
  const int64_t blocks = (m + kRows - 1) / kRows;
#pragma omp parallel for schedule(static)
  for (int64_t item = 0; item < batch * blocks; ++item) {
    const int64_t bi = item / blocks, first = item % blocks * kRows, rows = std::min(kRows, m - first);
    thread_local std::vector<float> sums;
    sums.resize(static_cast<size_t>(rows * n));
    onednn::gemm_bf16(false, false, rows, n, k, pa + (bi * m + first) * k, k, pb + bi * k * n, n, sums.data(), n);
    bfloat16* c = pc + (bi * m + first) * n;
    for (int64_t i = 0; i < rows * n; ++i) c[i] = bfloat16(sums[static_cast<size_t>(i)]);
  }
}

// The plain reference: float32 sums of bf16 products, one rounding per element.
void reference_bf16_matmul(const Tensor& out, const Tensor& a, const Tensor& b) {
  const int64_t nd = out.dim(), m = out.shape()[nd - 2], n = out.shape()[nd - 1], k = a.shape()[nd - 1];
  const Shape batch(out.shape().begin(), out.shape().end() - 2);
  const Shape a_batch_strides(a.strides().begin(), a.strides().end() - 2);
  const Shape b_batch_strides(b.strides().begin(), b.strides().end() - 2);
  const auto* pa = static_cast<const bfloat16*>(a.raw_data());
  const auto* pb = static_cast<const bfloat16*>(b.raw_data());
  auto* pc = static_cast<bfloat16*>(out.raw_data());
  const int64_t sam = a.strides()[nd - 2], sak = a.strides()[nd - 1], sbk = b.strides()[nd - 2], sbn = b.strides()[nd - 1];
  for (int64_t bi = 0; bi < shape_numel(batch); ++bi) {
    const bfloat16* A = pa + strided_offset(bi, batch, a_batch_strides);
    const bfloat16* B = pb + strided_offset(bi, batch, b_batch_strides);
    bfloat16* C = pc + bi * m * n;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        float acc = 0;
        for (int64_t p = 0; p < k; ++p) acc += float(A[i * sam + p * sak]) * float(B[p * sbk + j * sbn]);
        C[i * n + j] = bfloat16(acc);
      }
  }
}

}  // namespace

LOOM_KERNELS(cpu_matmul_bf16) {
  register_kernel<kernels::MatmulKernel>("matmul", DeviceType::cpu, DType::bf16, onednn_matmul, reference_bf16_matmul);
}

}  // namespace loom
