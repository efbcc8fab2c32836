// CPU kernels of matmul (ops/src/matmul.cpp) for bfloat16 operands: oneDNN's
// matmul (AVX512-BF16 or AMX where the CPU has them) with float32 accumulation,
// rounded once to bfloat16 at the end, beside a plain reference loop that does
// the same in float32. Primitives are costly to create, so one is kept per shape.
#include <dnnl.hpp>

#include <map>
#include <mutex>
#include <tuple>

#include "loom/autograd.h"
#include "loom/kernel_table.h"
#include "loom/ops.h"
#include "loom/ops/kernel_signatures.h"

namespace loom {

namespace {

using dims = dnnl::memory::dims;
using tag = dnnl::memory::format_tag;

// [batch, m, k] @ [batch, k, n] -> [batch, m, n], all bf16 and contiguous.
struct Bf16Matmul {
  dnnl::matmul primitive;
  explicit Bf16Matmul(const dnnl::engine& engine, int64_t batch, int64_t m, int64_t k, int64_t n) {
    const auto bf16_desc = [](dims shape) { return dnnl::memory::desc(shape, dnnl::memory::data_type::bf16, tag::abc); };
    dnnl::matmul::desc desc(bf16_desc({batch, m, k}), bf16_desc({batch, k, n}), bf16_desc({batch, m, n}));
    primitive = dnnl::matmul(dnnl::matmul::primitive_desc(desc, engine));
  }
};

void onednn_matmul(const Tensor& out, const Tensor& a_view, const Tensor& b_view) {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  static std::mutex mutex;
  static std::map<std::tuple<int64_t, int64_t, int64_t, int64_t>, Bf16Matmul> cache;
  const int64_t nd = out.dim(), m = out.shape()[nd - 2], n = out.shape()[nd - 1], k = a_view.shape()[nd - 1];
  const int64_t batch = out.numel() / std::max<int64_t>(m * n, 1);
  if (out.numel() == 0) return;
  Tensor a, b;
  {
    NoGradGuard no_grad;  // broadcast or transposed operands become dense (a kernel internal)
    a = contiguous(a_view);
    b = contiguous(b_view);
  }
  std::lock_guard lock(mutex);  // one stream, one cached primitive per shape
  auto it = cache.find({batch, m, k, n});
  if (it == cache.end()) it = cache.emplace(std::tuple{batch, m, k, n}, Bf16Matmul(engine, batch, m, k, n)).first;
  dnnl::stream stream(engine);
  const auto memory = [&](dims shape, const Tensor& t) {
    return dnnl::memory({shape, dnnl::memory::data_type::bf16, tag::abc}, engine, const_cast<void*>(t.raw_data()));
  };
  it->second.primitive.execute(stream, {{DNNL_ARG_SRC, memory({batch, m, k}, a)},
                                        {DNNL_ARG_WEIGHTS, memory({batch, k, n}, b)},
                                        {DNNL_ARG_DST, memory({batch, m, n}, out)}});
  stream.wait();
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
