#pragma once
// How float32 matmuls compute: in float32 (the default), or in bfloat16, the
// matmul half of mixed-precision training (PyTorch: torch.set_float32_matmul_precision
// and autocast). In bf16 mode a float32 matmul rounds both operands to bfloat16,
// sums the products in float32 and returns float32; nothing else changes.
//
// The mixed-precision rules, as PyTorch's CPU autocast draws them:
// - bf16: the matrix products (linear layers, attention's scores and weighted sums,
//   the output projection), forward and backward (their gradients are matmuls too);
// - float32: parameters (the master weights), gradients, Adam's moments, embeddings,
//   softmax and log-softmax, layer norm, dropout, the loss, everything elementwise.
// Unlike autocast, the product's result stays float32 instead of being rounded to
// bfloat16 as well: one rounding fewer, and no bf16 tensors between ops. And on the
// CPU a tiny product (under 2^17 multiply-adds, as one head's attention scores are)
// stays float32: rounding its operands costs more than bf16 saves (ops/cpu/matmul.cpp);
// except a product by a weight packed for decoding in bf16 mode, bf16 at any size
// (ops/cpu/packed_matmul.h), so that a row's bits never depend on how many rows share it.
// A product autograd will differentiate rounds its operands once and keeps the
// bfloat16 copies for backward (ops/src/matmul.cpp): it has no second derivative.
//
// A CPU without fast bf16 products (AVX512-BF16, as oneDNN sees it; ops.h:
// cpu_bf16_matmul_available) stays in float32 whatever the mode says. On CUDA the
// mode is cuBLAS's CUBLAS_COMPUTE_32F_FAST_16BF, the same rule on tensor cores. The setting
// is process-wide; change it between steps, not while another thread computes.
namespace loom {

enum class MatmulPrecision { float32, bf16 };

MatmulPrecision matmul_precision();
// Returns the previous setting.
MatmulPrecision set_matmul_precision(MatmulPrecision precision);
const char* to_string(MatmulPrecision precision);

// Sets a precision for a scope (tests, a decoding call), then restores the old one.
class MatmulPrecisionGuard {
 public:
  explicit MatmulPrecisionGuard(MatmulPrecision precision) : previous_(set_matmul_precision(precision)) {}
  ~MatmulPrecisionGuard() { set_matmul_precision(previous_); }
  MatmulPrecisionGuard(const MatmulPrecisionGuard&) = delete;
  MatmulPrecisionGuard& operator=(const MatmulPrecisionGuard&) = delete;

 private:
  MatmulPrecision previous_;
};

}  // namespace loom
