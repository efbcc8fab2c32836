// matmul (and so bmm and every batched product) through cuBLAS: row-major
// C = A B computed as column-major C^T = B^T A^T, transposed operands folded
// into the call (no copies for views with a unit stride in either of their
// last two dims), batch dims coalesced into strided-batched calls (broadcast
// batches: stride 0). float32 uses TF32 tensor cores only when asked
// (loom::cuda::set_tf32_enabled, LOOM_CUDA_TF32=1); bf16 ones for the bfloat16
// dtype and for float32 in bf16 matmul precision (operands rounded here first).
// The linear op's kernel is one cuBLASLt product with a bias epilogue (float32 and
// bfloat16; float64, or what cuBLASLt does not take: the product, then the bias added
// in place), and linear_param_grads one with a bias-gradient epilogue (gemm_epilogue.h).
#include <algorithm>
#include <climits>

#include "elementwise_ops.h"
#include "gemm_epilogue.h"
#include "loom/kernel_table.h"
#include "loom/matmul_precision.h"
#include "loom/ops/kernel_signatures.h"
#include "reduce_launch.h"
#include "tensor_args.h"

namespace loom::cuda {

namespace {

// A row-major rows x cols operand as the column-major cols x rows matrix cuBLAS takes.
struct BlasOperand {
  Tensor tensor;  // the operand, or its dense copy
  cublasOperation_t op = CUBLAS_OP_N;
  int64_t ld = 0;
};

// t copied into a row-major tensor of its shape (through the copy kernel), batch dims included.
template <typename T>
Tensor dense_copy(const Tensor& t, cudaStream_t stream) {
  Tensor dense = Tensor::empty(t.shape(), {t.dtype(), t.device()});
  launch_cast<T>(element_type(t.dtype()), strided<2>("matmul", t.shape(), {dense.strides(), t.strides()}),
                 dense.raw_data(), t.raw_data(), stream);
  return dense;
}

template <typename T>
BlasOperand blas_operand(const Tensor& t, int64_t rows, int64_t cols, cudaStream_t stream) {
  const int64_t nd = t.dim(), rs = t.stride(nd - 2), cs = t.stride(nd - 1);
  if (cs == 1 && rs >= std::max<int64_t>(1, cols)) return {t, CUBLAS_OP_N, rs};
  if (rs == 1 && cs >= std::max<int64_t>(1, rows)) return {t, CUBLAS_OP_T, cs};
  return {dense_copy<T>(t, stream), CUBLAS_OP_N, cols};  // neither
}

GemmOperand gemm_operand(const BlasOperand& o) { return {o.tensor.raw_data(), o.op, o.ld}; }
// A cuBLASLt product of T operands (float or bfloat16) into `result`.
template <typename T>
GemmTypes gemm_types(DType result) {
  return {.operands = std::is_same_v<T, bfloat16> ? CUDA_R_16BF : CUDA_R_32F,
          .result = result == DType::bf16 ? CUDA_R_16BF : CUDA_R_32F,
          .tf32 = std::is_same_v<T, float> && tf32_enabled()};
}

int blas_int(int64_t v, const char* what) {
  LOOM_CHECK(v <= INT_MAX, "matmul: {} = {} exceeds cuBLAS's int range", what, v);
  return static_cast<int>(v);
}

// C^T (n x m, ldc n) = op(B') (n x k) op(A') (k x m), `batches` of them at the given strides.
// The bfloat16 dtype: bf16 in and out, float32 sums, one rounding (or float32
// out, float_out: the sums kept).
template <typename T>
void gemm_batched(cublasHandle_t handle, const BlasOperand& a, const BlasOperand& b, void* c, const T* pa, const T* pb,
                  int64_t m, int64_t n, int64_t k, int64_t batches, int64_t stride_a, int64_t stride_b,
                  int64_t stride_c, bool float_out) {
  const int im = blas_int(m, "M"), in = blas_int(n, "N"), ik = blas_int(k, "K"), count = blas_int(batches, "batch");
  const int lda = blas_int(a.ld, "lda"), ldb = blas_int(b.ld, "ldb");
  // A float32-computed product of `type` operands (alpha and beta are float32 then).
  auto gemm_ex = [&](cudaDataType_t type, cublasComputeType_t compute, cudaDataType_t c_type) {
    const float one = 1, zero = 0;
    LOOM_CUBLAS_CHECK(cublasGemmStridedBatchedEx(handle, b.op, a.op, in, im, ik, &one, pb, type, ldb, stride_b, pa,
                                                 type, lda, stride_a, &zero, c, c_type, in, stride_c, count, compute,
                                                 CUBLAS_GEMM_DEFAULT));
  };
  if constexpr (std::is_same_v<T, bfloat16>) {
    gemm_ex(CUDA_R_16BF, CUBLAS_COMPUTE_32F, float_out ? CUDA_R_32F : CUDA_R_16BF);
  } else if constexpr (std::is_same_v<T, double>) {
    const double one = 1, zero = 0;
    LOOM_CUBLAS_CHECK(cublasDgemmStridedBatched(handle, b.op, a.op, in, im, ik, &one, pb, ldb, stride_b, pa, lda,
                                                stride_a, &zero, static_cast<double*>(c), in, stride_c, count));
  } else if (tf32_enabled()) {
    gemm_ex(CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32, CUDA_R_32F);
  } else {
    const float one = 1, zero = 0;
    LOOM_CUBLAS_CHECK(cublasSgemmStridedBatched(handle, b.op, a.op, in, im, ik, &one, pb, ldb, stride_b, pa, lda,
                                                stride_a, &zero, static_cast<float*>(c), in, stride_c, count));
  }
}

// t rounded to bfloat16 (to nearest, ties to even, as the CPU rounds), dense.
Tensor rounded_to_bf16(const Tensor& t, cudaStream_t stream) {
  Tensor r = Tensor::empty(t.shape(), {DType::bf16, t.device()});
  launch_cast<float>(ElementType::bf16, strided<2>("matmul", t.shape(), {r.strides(), t.strides()}), r.raw_data(),
                     t.raw_data(), stream);
  return r;
}

template <typename T>
void matmul(const Tensor& out, const Tensor& a, const Tensor& b) {
  OnDevice on(out);
  // float32 in bf16 matmul precision (loom/matmul_precision.h): the CPU's rule,
  // operands rounded to bfloat16, float32 sums and result. Not cuBLAS's
  // COMPUTE_32F_FAST_16BF: on an H100 its conversion missed the rounded operands'
  // products by 2^-9 relative (tests/test_cuda.cpp).
  if constexpr (std::is_same_v<T, float>) {
    if (matmul_precision() == MatmulPrecision::bf16 && out.numel() > 0)
      return matmul<bfloat16>(out, rounded_to_bf16(a, on.stream()), rounded_to_bf16(b, on.stream()));
  }
  const int64_t nd = out.dim(), m = out.size(nd - 2), n = out.size(nd - 1), k = a.size(nd - 1);
  if (out.numel() == 0) return;
  if (k == 0) {  // an empty sum: zeros
    LOOM_CUDA_CHECK(cudaMemsetAsync(out.raw_data(), 0, out.numel() * dtype_size(out.dtype()), on.stream()));
    return;
  }
  BlasOperand ba = blas_operand<T>(a, m, k, on.stream()), bb = blas_operand<T>(b, k, n, on.stream());
  cublasHandle_t handle = cublas(out.device().index);
  // The batch dims, coalesced where all three operands allow; the innermost
  // run is one strided-batched call, the outer ones a host loop.
  const Shape batch(out.shape().begin(), out.shape().end() - 2);
  auto batch_strides = [&](const Tensor& t) { return Shape(t.strides().begin(), t.strides().end() - 2); };
  auto coalesce = [&] {
    return strided<3>("matmul", batch, {batch_strides(out), batch_strides(ba.tensor), batch_strides(bb.tensor)});
  };
  Strided<3> s = coalesce();
  // Batches that do not coalesce, as attention's [batch, heads] views of
  // [batch, length, heads, d] do not, would cost one cuBLAS call per outer index
  // (64 where one does). A dense copy of such an operand is one copy kernel, and
  // its batches coalesce: on an H100 the base model's float32 step went from 91
  // to 24 ms. Broadcast operands (a zero batch stride) stay views: a copy would
  // multiply them.
  if (s.numel > s.sizes[s.ndim - 1]) {
    auto densify = [&](BlasOperand& o, const Tensor& t, int64_t rows, int64_t cols) {
      const Shape strides = batch_strides(t);
      if (!t.is_contiguous() && std::find(strides.begin(), strides.end(), 0) == strides.end())
        o = blas_operand<T>(dense_copy<T>(t, on.stream()), rows, cols, on.stream());
    };
    densify(ba, a, m, k);
    densify(bb, b, k, n);
    s = coalesce();
  }
  const int inner = s.ndim - 1;
  const int64_t runs = s.numel / s.sizes[inner];
  // The result: T, or float32 sums of bfloat16 operands (bf16 matmul precision's rounded-once products).
  const bool float_out = std::is_same_v<T, bfloat16> && out.dtype() == DType::f32;
  char* pc = static_cast<char*>(out.raw_data());
  const int64_t out_element = dtype_size(out.dtype());
  const T* pa = static_cast<const T*>(ba.tensor.raw_data());
  const T* pb = static_cast<const T*>(bb.tensor.raw_data());
  for (int64_t run = 0; run < runs; ++run) {
    int64_t off[3] = {0, 0, 0};
    if (inner > 0) {
      int64_t rest = run;
      for (int d = inner - 1; d >= 0; --d) {
        const int64_t index = rest % s.sizes[d];
        rest /= s.sizes[d];
        for (int q = 0; q < 3; ++q) off[q] += index * s.strides[q][d];
      }
    }
    gemm_batched<T>(handle, ba, bb, pc + off[0] * out_element, pa + off[1], pb + off[2], m, n, k, s.sizes[inner],
                    s.strides[1][inner], s.strides[2][inner], s.strides[0][inner], float_out);
  }
}

// The linear op (ops/src/linear.cpp) in one cuBLASLt product: its bias epilogue adds
// the bias to the float32 sums before their one rounding to out's dtype (as the CPU
// kernels do). T: the operands' type (float, or bfloat16 rounded operands with a float32
// or bfloat16 result); the bias has out's dtype (cuBLASLt's rule). False where
// cuBLASLt does not take the case: nothing ran.
template <typename T>
bool linear_in_one_product(const Tensor& out, const Tensor& x, const Tensor& w_t, const Tensor& bias,
                           cudaStream_t stream) {
  const int64_t m = out.size(0), n = out.size(1), k = x.size(1);
  if (bias.dtype() != out.dtype() || !out.is_contiguous() || m == 0 || n == 0 || k == 0) return false;
  const BlasOperand a = blas_operand<T>(x, m, k, stream), b = blas_operand<T>(w_t, k, n, stream);
  return gemm_epilogue(out.device().index, stream, Epilogue::bias, gemm_types<T>(out.dtype()), gemm_operand(a),
                       gemm_operand(b), out.raw_data(), m, n, k, const_cast<void*>(bias.raw_data()));
}

// Where cuBLASLt does not take it (and for float64): cuBLAS's product, then the
// bias added in place by the add kernel's launch: the bits of matmul and then add.
template <typename T>
void add_bias_in_place(const Tensor& out, const Tensor& bias) {
  OnDevice on(out);
  const Strided<3> s =
      strided<3>("linear", out.shape(), {out.strides(), out.strides(), broadcast_strides(bias, out.shape())});
  launch_binary<T>(BinaryOp::add, s, out.raw_data(), out.raw_data(), bias.raw_data(), on.stream());
}
template <typename T>
void linear(const Tensor& out, const Tensor& x, const Tensor& w_t, const Tensor& bias) {
  if constexpr (std::is_same_v<T, float>) {
    OnDevice on(out);
    // bf16 matmul precision: the operands rounded first, as matmul<float> rounds them.
    const bool rounded = matmul_precision() == MatmulPrecision::bf16;
    if (rounded ? linear_in_one_product<bfloat16>(out, rounded_to_bf16(x, on.stream()),
                                                  rounded_to_bf16(w_t, on.stream()), bias, on.stream())
                : linear_in_one_product<float>(out, x, w_t, bias, on.stream()))
      return;
  }
  matmul<T>(out, x, w_t);
  add_bias_in_place<T>(out, bias);
}
// bfloat16 operands: bf16 precision's rounded-once products (float32 bias and
// result), or mixed precision's all bfloat16, where the bias joins the float32 sums
// before their one rounding, as on the CPU.
void linear_bf16(const Tensor& out, const Tensor& x, const Tensor& w_t, const Tensor& bias) {
  OnDevice on(out);
  if (linear_in_one_product<bfloat16>(out, x, w_t, bias, on.stream())) return;
  if (out.dtype() == DType::f32) {
    matmul<bfloat16>(out, x, w_t);
    return add_bias_in_place<float>(out, bias);
  }
  Tensor sums = Tensor::empty(out.shape(), {DType::f32, out.device()});
  matmul<bfloat16>(sums, x, w_t);
  add_bias_in_place<float>(sums, widened(bias, on.stream()));
  convert_into(out, sums, on.stream());
}

// linear_param_grads (ops/src/linear_param_grads.cpp): out = [dW = gᵀ x; db = Σ_rows g],
// one cuBLASLt product whose bias-gradient epilogue sums g's rows as it reads them;
// where cuBLASLt does not take it (and for float64), cuBLAS's product and the sum kernel.
template <typename T>
void linear_param_grads(const Tensor& out, const Tensor& g, const Tensor& x) {
  OnDevice on(out);
  const int64_t rows = g.size(0), n = g.size(1), k = x.size(1);
  const Tensor dw = Tensor::make_view(out, {n, k}, {k, 1}, out.offset());
  const Tensor db = Tensor::make_view(out, {n}, {1}, out.offset() + n * k);
  const Tensor g_t = Tensor::make_view(g, {n, rows}, {g.stride(1), g.stride(0)}, g.offset());
  if (!std::is_same_v<T, double> && rows > 0 && n > 0 && k > 0) {
    const BlasOperand a = blas_operand<T>(g_t, n, rows, on.stream()), b = blas_operand<T>(x, rows, k, on.stream());
    if (gemm_epilogue(out.device().index, on.stream(), Epilogue::bias_gradient, gemm_types<T>(out.dtype()),
                      gemm_operand(a), gemm_operand(b), dw.raw_data(), n, k, rows, db.raw_data()))
      return;
  }
  matmul<T>(dw, g_t, x);
  ReduceShape s;  // db [n] = Σ over g's rows
  s.outer_ndim = s.inner_ndim = 1;
  s.outer_sizes[0] = s.outputs = n;
  s.outer_strides[0] = g.stride(1);
  s.inner_sizes[0] = s.reduced = rows;
  s.inner_strides[0] = g.stride(0);
  launch_reduce<T>(Reduction::sum, s, db.raw_data(), g.raw_data(), 1.0, on.stream());
}

}  // namespace

LOOM_KERNELS(cuda_matmul) {
  register_kernel<kernels::LinearKernel>("linear", DeviceType::cuda, DType::f32, linear<float>);
  register_kernel<kernels::LinearKernel>("linear", DeviceType::cuda, DType::f64, linear<double>);
  register_kernel<kernels::LinearKernel>("linear", DeviceType::cuda, DType::bf16, linear_bf16);
  register_kernel<kernels::LinearParamGradsKernel>("linear_param_grads", DeviceType::cuda, DType::f32,
                                                   linear_param_grads<float>);
  register_kernel<kernels::LinearParamGradsKernel>("linear_param_grads", DeviceType::cuda, DType::f64,
                                                   linear_param_grads<double>);
  register_kernel<kernels::LinearParamGradsKernel>("linear_param_grads", DeviceType::cuda, DType::bf16,
                                                   linear_param_grads<bfloat16>);
  register_kernel<kernels::MatmulKernel>("matmul", DeviceType::cuda, DType::f32, matmul<float>);
  register_kernel<kernels::MatmulKernel>("matmul", DeviceType::cuda, DType::f64, matmul<double>);
  register_kernel<kernels::MatmulKernel>("matmul", DeviceType::cuda, DType::bf16, matmul<bfloat16>);
}

}  // namespace loom::cuda
