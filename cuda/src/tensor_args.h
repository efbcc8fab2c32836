#pragma once
// Host side of a CUDA kernel: Tensors turned into the plain arguments the .cu
// launchers take (pointers, merged sizes and strides), and the device made
// current with its stream at hand.
#include <array>
#include <string_view>

#include "loom/cuda/launch.h"
#include "loom/error.h"
#include "loom/kernels/loops.h"
#include "loom/tensor.h"
#include "rows_launch.h"
#include "runtime.h"
#include "type_lists.h"

namespace loom::cuda {

// N operands over `shape`, each with its strides there (broadcast: 0), dims
// merged where every operand allows it (kernels::make_loop, the CPU's rule).
template <int N>
Strided<N> strided(std::string_view op, const Shape& shape, const std::array<Shape, N>& strides) {
  kernels::Loop<N> loop = kernels::make_loop<N>(shape, strides);
  const int ndim = static_cast<int>(loop.sizes.size());
  LOOM_CHECK(ndim <= kMaxDims, "{}: {} dims left after merging; the CUDA kernels take at most {}", op, ndim, kMaxDims);
  Strided<N> s;
  s.ndim = ndim;
  s.numel = loop.numel;
  for (int d = 0; d < ndim; ++d) {
    s.sizes[d] = loop.sizes[d];
    for (int k = 0; k < N; ++k) s.strides[k][d] = loop.strides[k][d];
  }
  s.contiguous = ndim == 1;
  for (int k = 0; k < N; ++k) s.contiguous = s.contiguous && s.strides[k][0] == 1;
  return s;
}

// t's strides when read as broadcast to `shape` (0 along broadcast dims): the
// rule of ops' broadcast_strides, here so that cuda links against core alone.
inline Shape broadcast_strides(const Tensor& t, const Shape& shape) {
  Shape strides(shape.size(), 0);
  const size_t lead = shape.size() - static_cast<size_t>(t.dim());
  for (size_t d = 0; d < static_cast<size_t>(t.dim()); ++d)
    strides[lead + d] =
        t.size(static_cast<int64_t>(d)) == 1 && shape[lead + d] != 1 ? 0 : t.stride(static_cast<int64_t>(d));
  return strides;
}

inline ElementType element_type(DType t) { return static_cast<ElementType>(static_cast<int>(t)); }
static_assert(static_cast<int>(DType::f32) == static_cast<int>(ElementType::f32) &&
              static_cast<int>(DType::f64) == static_cast<int>(ElementType::f64) &&
              static_cast<int>(DType::i32) == static_cast<int>(ElementType::i32) &&
              static_cast<int>(DType::i64) == static_cast<int>(ElementType::i64) &&
              static_cast<int>(DType::b8) == static_cast<int>(ElementType::b8) &&
              static_cast<int>(DType::bf16) == static_cast<int>(ElementType::bf16));

// A kernel launch on the device `t` lives on: that device current, its stream.
class OnDevice {
 public:
  explicit OnDevice(const Tensor& t) : guard_(t.device().index), stream_(cuda::stream(t.device().index)) {}
  cudaStream_t stream() const { return stream_; }

 private:
  DeviceGuard guard_;
  cudaStream_t stream_;
};

// x as dense rows over its last dim, for the row kernels (rows_launch.h).
inline Rows rows_of(const Tensor& x) {
  const int64_t n = x.dim() == 0 ? 1 : x.shape().back();
  return {n == 0 ? 0 : x.numel() / n, n};
}

// A pointer for an optional operand (weight, bias): null when undefined.
inline const void* data_or_null(const Tensor& t) { return t.defined() ? t.raw_data() : nullptr; }

// `to` = `from`'s elements converted to to's dtype (the copy kernel's cast; both of one
// shape, each read at its own strides).
void convert_into(const Tensor& to, const Tensor& from, cudaStream_t stream);

// A bfloat16 tensor as the float32 its kernels compute in (compute_type): a dense copy,
// or for a view that is not contiguous (an expanded mask) its strides kept over a
// float32 copy of its whole storage. Other dtypes and undefined tensors as they are.
Tensor widened(const Tensor& t, cudaStream_t stream);

}  // namespace loom::cuda
