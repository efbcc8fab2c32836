// Registers embedding and embedding_backward for cuda (kernels: embedding.cu).
#include "loom/kernel_table.h"
#include "loom/ops/kernel_signatures.h"
#include "embedding_launch.h"
#include "rows_launch.h"
#include "tensor_args.h"

namespace loom::cuda {

namespace {

// Every id in [0, vocab), else the CPU's error.
void check_ids(std::string_view op, const Tensor& ids, int64_t vocab, cudaStream_t stream) {
  Tensor scratch = Tensor::empty({1}, {DType::i64, ids.device()});
  BadId bad = find_bad_id(static_cast<const int64_t*>(ids.raw_data()), ids.numel(), vocab, 0, false, scratch.raw_data(),
                          stream);
  LOOM_CHECK(bad.position < 0, "{}: id {} is out of range for a vocabulary of {}", op, bad.id, vocab);
}

template <typename T>
void embedding(const Tensor& out, const Tensor& weight, const Tensor& ids) {
  OnDevice on(out);
  check_ids("embedding", ids, weight.size(0), on.stream());
  launch_embedding<T>(out.raw_data(), weight.raw_data(), weight.stride(0), weight.stride(1),
                      static_cast<const int64_t*>(ids.raw_data()), ids.numel(), weight.size(1), on.stream());
}

template <typename T>
void embedding_backward(const Tensor& out, const Tensor& grad, const Tensor& ids, int64_t padding_idx) {
  OnDevice on(out);
  const int64_t vocab = out.size(0), n = ids.numel();
  check_ids("embedding_backward", ids, vocab, on.stream());
  const size_t bytes = embedding_backward_scratch_bytes(n);
  Tensor scratch = Tensor::empty({static_cast<int64_t>(bytes)}, {DType::b8, out.device()});
  launch_embedding_backward<T>(out.raw_data(), grad.raw_data(), static_cast<const int64_t*>(ids.raw_data()), n, vocab,
                               out.size(1), padding_idx, scratch.raw_data(), bytes, on.stream());
}

template <typename T>
void register_embedding() {
  register_kernel<kernels::EmbeddingKernel>("embedding", DeviceType::cuda, dtype_of<T>(), embedding<T>);
  register_kernel<kernels::EmbeddingBackwardKernel>("embedding_backward", DeviceType::cuda, dtype_of<T>(),
                                                    embedding_backward<T>);
}

}  // namespace

LOOM_KERNELS(cuda_embedding) {
  register_embedding<float>();
  register_embedding<double>();
  register_embedding<int32_t>();
  register_embedding<int64_t>();
  register_kernel<kernels::EmbeddingKernel>("embedding", DeviceType::cuda, DType::b8, embedding<bool>);
}

}  // namespace loom::cuda
