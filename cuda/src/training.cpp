// Registers dropout, adam_step_/sgd_step_, embedding (and its backward) and
// arange for cuda.
#include "loom/kernel_table.h"
#include "loom/ops/kernel_signatures.h"
#include "rows_launch.h"
#include "tensor_args.h"
#include "training_launch.h"

namespace loom::cuda {

namespace {

uint32_t* mask_words(const Tensor& mask) { return static_cast<uint32_t*>(mask.raw_data()); }

template <typename T>
void dropout(const Tensor& out, const Tensor& mask, const Tensor& x, double p, uint64_t seed, uint64_t offset) {
  OnDevice on(out);
  launch_dropout<T>(out.raw_data(), mask_words(mask), x.raw_data(), x.numel(), p, seed, offset, on.stream());
}

template <typename T>
void dropout_backward(const Tensor& out, const Tensor& grad, const Tensor& mask, double p) {
  OnDevice on(out);
  launch_dropout_backward<T>(out.raw_data(), grad.raw_data(), mask_words(mask), grad.numel(), p, on.stream());
}

template <typename T>
void adam_step(const Tensor& w, const Tensor& grad, const Tensor& m, const Tensor& v, const AdamStep& s) {
  OnDevice on(w);
  launch_adam_step<T>(w.raw_data(), grad.raw_data(), m.raw_data(), v.raw_data(), w.numel(),
                      {s.beta1, s.beta2, s.eps, s.step_size, s.root_correction2, s.shrink, s.l2}, on.stream());
}

template <typename T>
void sgd_step(const Tensor& w, const Tensor& grad, const Tensor& buffer, const SgdStep& s) {
  OnDevice on(w);
  launch_sgd_step<T>(w.raw_data(), grad.raw_data(), buffer.defined() ? buffer.raw_data() : nullptr, w.numel(),
                     {s.lr, s.weight_decay, s.momentum, s.dampening, s.nesterov, s.first}, on.stream());
}

// Every id in [0, vocab), else the CPU's error.
void check_ids(std::string_view op, const Tensor& ids, int64_t vocab, cudaStream_t stream) {
  Tensor scratch = Tensor::empty({1}, {DType::i64, ids.device()});
  BadId bad = find_bad_id(static_cast<const int64_t*>(ids.raw_data()), ids.numel(), vocab, 0, false,
                          scratch.raw_data(), stream);
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
void arange(const Tensor& out) {
  OnDevice on(out);
  launch_arange<T>(out.raw_data(), out.numel(), on.stream());
}

template <typename T>
void register_floating() {
  constexpr DType t = dtype_of<T>();
  register_kernel<kernels::DropoutKernel>("dropout", DeviceType::cuda, t, dropout<T>);
  register_kernel<kernels::DropoutBackwardKernel>("dropout_backward", DeviceType::cuda, t, dropout_backward<T>);
  register_kernel<kernels::AdamStepKernel>("adam_step_", DeviceType::cuda, t, adam_step<T>);
  register_kernel<kernels::SgdStepKernel>("sgd_step_", DeviceType::cuda, t, sgd_step<T>);
}

template <typename T>
void register_numeric() {
  constexpr DType t = dtype_of<T>();
  register_kernel<kernels::EmbeddingKernel>("embedding", DeviceType::cuda, t, embedding<T>);
  register_kernel<kernels::EmbeddingBackwardKernel>("embedding_backward", DeviceType::cuda, t, embedding_backward<T>);
  register_kernel<kernels::ArangeKernel>("arange", DeviceType::cuda, t, arange<T>);
}

}  // namespace

LOOM_KERNELS(cuda_training) {
  register_floating<float>();
  register_floating<double>();
  register_numeric<float>();
  register_numeric<double>();
  register_numeric<int32_t>();
  register_numeric<int64_t>();
  register_kernel<kernels::EmbeddingKernel>("embedding", DeviceType::cuda, DType::b8, embedding<bool>);
}

}  // namespace loom::cuda
