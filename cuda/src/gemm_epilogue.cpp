#include "gemm_epilogue.h"

#include <memory>

namespace loom::cuda {

namespace {

// cuBLASLt's descriptors, destroyed with their owner.
struct DescDeleter {
  void operator()(cublasLtMatmulDescOpaque_t* d) const { cublasLtMatmulDescDestroy(d); }
  void operator()(cublasLtMatrixLayoutOpaque_t* l) const { cublasLtMatrixLayoutDestroy(l); }
  void operator()(cublasLtMatmulPreferenceOpaque_t* p) const { cublasLtMatmulPreferenceDestroy(p); }
};
using MatmulDesc = std::unique_ptr<cublasLtMatmulDescOpaque_t, DescDeleter>;
using Layout = std::unique_ptr<cublasLtMatrixLayoutOpaque_t, DescDeleter>;
using Preference = std::unique_ptr<cublasLtMatmulPreferenceOpaque_t, DescDeleter>;

// The column-major layout of a stored operand: rows x cols as op(·) reads it
// (op_rows x op_cols), stored transposed where op is T.
Layout layout(cudaDataType_t type, cublasOperation_t op, int64_t op_rows, int64_t op_cols, int64_t ld) {
  cublasLtMatrixLayout_t l = nullptr;
  const bool t = op == CUBLAS_OP_T;
  LOOM_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&l, type, static_cast<uint64_t>(t ? op_cols : op_rows),
                                               static_cast<uint64_t>(t ? op_rows : op_cols), ld));
  return Layout(l);
}

template <typename V>
void set(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attribute, const V& value) {
  LOOM_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, attribute, &value, sizeof(value)));
}

}  // namespace

bool gemm_epilogue(int device, cudaStream_t stream, Epilogue epilogue, GemmTypes types, const GemmOperand& a,
                   const GemmOperand& b, void* d, int64_t m, int64_t n, int64_t k, void* vector) {
  // Row-major d = a b is column-major dᵀ (n x m) = bᵀ aᵀ: cuBLASLt's A is b, its B is a.
  // So the bias (one per column of the row-major d) runs along cuBLASLt's rows
  // (EPILOGUE_BIAS), and the sums of a's rows along its columns, reduced over k
  // from its B (EPILOGUE_BGRADB).
  cublasLtMatmulDesc_t raw_desc = nullptr;
  LOOM_CUBLAS_CHECK(
      cublasLtMatmulDescCreate(&raw_desc, types.tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F, CUDA_R_32F));
  MatmulDesc desc(raw_desc);
  set(raw_desc, CUBLASLT_MATMUL_DESC_TRANSA, b.op);
  set(raw_desc, CUBLASLT_MATMUL_DESC_TRANSB, a.op);
  set(raw_desc, CUBLASLT_MATMUL_DESC_EPILOGUE,
      epilogue == Epilogue::bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_BGRADB);
  set(raw_desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, vector);
  set(raw_desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, static_cast<int32_t>(types.result));
  const Layout la = layout(types.operands, b.op, n, k, b.ld), lb = layout(types.operands, a.op, k, m, a.ld);
  const Layout ld = layout(types.result, CUBLAS_OP_N, n, m, n);

  const Workspace workspace = lt_workspace(device);
  cublasLtMatmulPreference_t raw_preference = nullptr;
  LOOM_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&raw_preference));
  Preference preference(raw_preference);
  const uint64_t workspace_bytes = workspace.bytes;
  LOOM_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(raw_preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                         &workspace_bytes, sizeof(workspace_bytes)));
  cublasLtHandle_t handle = cublas_lt(device);
  cublasLtMatmulHeuristicResult_t found{};
  int count = 0;
  // NOT_SUPPORTED, or no algorithm: this case is not cuBLASLt's to run.
  if (cublasLtMatmulAlgoGetHeuristic(handle, raw_desc, la.get(), lb.get(), ld.get(), ld.get(), raw_preference, 1,
                                     &found, &count) != CUBLAS_STATUS_SUCCESS ||
      count == 0)
    return false;
  const float one = 1, zero = 0;
  LOOM_CUBLAS_CHECK(cublasLtMatmul(handle, raw_desc, &one, b.data, la.get(), a.data, lb.get(), &zero, d, ld.get(), d,
                                   ld.get(), &found.algo, workspace.data, workspace.bytes, stream));
  return true;
}

}  // namespace loom::cuda
