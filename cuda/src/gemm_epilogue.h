#pragma once
// Products with an epilogue, through cuBLASLt: row-major d [m, n] = a [m, k] b [k, n]
// with float32 sums and, in the same kernel,
//   Epilogue::bias           vector [n] added to every row of the sums before their one
//                            rounding to d's type (the linear op's forward);
//   Epilogue::bias_gradient  vector [m] = Σ_k a (the sums of a's rows), written beside
//                            d (linear's backward: a = gᵀ, so d = gᵀ x is dW and the
//                            vector is db = Σ_rows g, with no second pass over g).
// The vector has d's type (cuBLASLt's rule). Where cuBLASLt offers no algorithm for
// the case (a type, a layout or an alignment it does not take) nothing runs and
// false comes back: the caller composes it from cuBLAS and a kernel.
#include <cstdint>

#include "runtime.h"

namespace loom::cuda {

enum class Epilogue { bias, bias_gradient };

// A row-major rows x cols operand as cuBLAS reads it: its data (a dense copy where
// its strides allow neither layout), transposed or not, and its leading dimension.
struct GemmOperand {
  const void* data = nullptr;
  cublasOperation_t op = CUBLAS_OP_N;
  int64_t ld = 0;
};

struct GemmTypes {
  cudaDataType_t operands = CUDA_R_32F;  // a's and b's
  cudaDataType_t result = CUDA_R_32F;    // d's and the vector's
  bool tf32 = false;                     // float32 operands on TF32 tensor cores
};

bool gemm_epilogue(int device, cudaStream_t stream, Epilogue epilogue, GemmTypes types, const GemmOperand& a,
                   const GemmOperand& b, void* d, int64_t m, int64_t n, int64_t k, void* vector);

}  // namespace loom::cuda
