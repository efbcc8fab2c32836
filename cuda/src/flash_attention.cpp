// Registers flash_attention and its backward for cuda (kernels: flash_attention.cu).
#include "flash_attention_launch.h"
#include "loom/error.h"
#include "loom/kernel_table.h"
#include "loom/ops/kernel_signatures.h"
#include "tensor_args.h"

namespace loom::cuda {

namespace {

AttentionCall call_of(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
                      const kernels::AttentionArgs& a) {
  AttentionCall c{};
  c.q = q.raw_data(), c.k = k.raw_data(), c.v = v.raw_data();
  c.batches = q.shape()[0], c.queries = q.shape()[1], c.keys = k.shape()[1];
  c.depth = q.shape()[2], c.value_depth = v.shape()[2];
  c.scale = a.scale, c.dropout_p = a.dropout_p, c.seed = a.seed, c.offset = a.offset;
  c.offset_base = captured_random_base(q.device().index);
  if (!mask.defined()) return c;
  const int64_t dims = mask.dim();
  LOOM_CHECK(dims - 2 <= kAttentionMaskDims, "flash_attention: a mask of {} batch dims (at most {} on cuda)", dims - 2,
             kAttentionMaskDims);
  c.mask = mask.storage()->data();  // the storage's start: the view's offset is mask_offset
  c.additive = mask.dtype() != DType::b8;
  c.batch_dims = static_cast<int>(dims - 2);
  for (int d = 0; d < c.batch_dims; ++d) c.batch_size[d] = mask.shape()[d], c.batch_stride[d] = mask.strides()[d];
  c.mask_offset = mask.offset(), c.row_stride = mask.strides()[dims - 2], c.col_stride = mask.strides()[dims - 1];
  return c;
}

template <typename T>
void forward(const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k, const Tensor& v,
             const Tensor& mask, const kernels::AttentionArgs& args) {
  OnDevice on(out);
  launch_attention<T>(call_of(q, k, v, mask, args), out.raw_data(), lse.raw_data(), on.stream());
}

template <typename T>
void backward(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& grad, const Tensor& q,
              const Tensor& k, const Tensor& v, const Tensor& mask, const Tensor& out, const Tensor& lse,
              const kernels::AttentionArgs& args) {
  OnDevice on(dq);
  Tensor row_dot = Tensor::empty({q.shape()[0] * q.shape()[1]}, {q.dtype(), q.device()});
  launch_attention_backward<T>(call_of(q, k, v, mask, args), dq.raw_data(), dk.raw_data(), dv.raw_data(),
                               grad.raw_data(), out.raw_data(), lse.raw_data(), row_dot.raw_data(), on.stream());
}

// ---- bfloat16: float32's kernels on widened copies of the operands ([B, T, D] each,
// never [T, T]), each result rounded once; the log-sum-exp stays float32 (the CPU's way) ----

Tensor float_like(const Tensor& t) { return Tensor::empty(t.shape(), {DType::f32, t.device()}); }

void forward_bf16(const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k, const Tensor& v,
                  const Tensor& mask, const kernels::AttentionArgs& args) {
  OnDevice on(out);
  const Tensor wide = float_like(out);
  forward<float>(wide, lse, widened(q, on.stream()), widened(k, on.stream()), widened(v, on.stream()),
                 widened(mask, on.stream()), args);
  convert_into(out, wide, on.stream());
}

void backward_bf16(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& grad, const Tensor& q,
                   const Tensor& k, const Tensor& v, const Tensor& mask, const Tensor& out, const Tensor& lse,
                   const kernels::AttentionArgs& args) {
  OnDevice on(dq);
  const cudaStream_t stream = on.stream();
  const Tensor wq = float_like(dq), wk = float_like(dk), wv = float_like(dv);
  backward<float>(wq, wk, wv, widened(grad, stream), widened(q, stream), widened(k, stream), widened(v, stream),
                  widened(mask, stream), widened(out, stream), lse, args);
  convert_into(dq, wq, stream), convert_into(dk, wk, stream), convert_into(dv, wv, stream);
}

template <typename T>
void register_for(DType type) {
  register_kernel<kernels::AttentionKernel>("flash_attention", DeviceType::cuda, type, forward<T>);
  register_kernel<kernels::AttentionBackwardKernel>("flash_attention_backward", DeviceType::cuda, type, backward<T>);
}

}  // namespace

LOOM_KERNELS(cuda_flash_attention) {
  register_for<float>(DType::f32);
  register_for<double>(DType::f64);
  register_kernel<kernels::AttentionKernel>("flash_attention", DeviceType::cuda, DType::bf16, forward_bf16);
  register_kernel<kernels::AttentionBackwardKernel>("flash_attention_backward", DeviceType::cuda, DType::bf16,
                                                    backward_bf16);
}

}  // namespace loom::cuda
