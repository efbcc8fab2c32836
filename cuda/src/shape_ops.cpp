// Registers triu/tril, gather, index_select, pad and cat for cuda. pad and cat
// are fills and copies into views of the output (the CPU's fast kernels' plan),
// through the fill and copy kernels.
#include "elementwise_ops.h"
#include "fill.h"
#include "index_launch.h"
#include "loom/kernel_table.h"
#include "loom/ops/kernel_signatures.h"
#include "rows_launch.h"
#include "tensor_args.h"

namespace loom::cuda {

namespace {

// out's shape (out dense), read from x's strides.
Box box_of(std::string_view op, const Tensor& out, const Tensor& x) {
  LOOM_CHECK(out.dim() <= kMaxDims, "{}: the CUDA kernels take at most {} dims, got {}", op, kMaxDims, out.dim());
  Box b;
  b.ndim = static_cast<int>(out.dim());
  b.numel = out.numel();
  for (int d = 0; d < b.ndim; ++d) {
    b.sizes[d] = out.size(d);
    b.x_strides[d] = x.stride(d);
  }
  return b;
}

template <bool Upper, typename T>
void triangle(const Tensor& out, const Tensor& x, int64_t diagonal) {
  OnDevice on(out);
  launch_triangle<T>(Upper, diagonal, box_of("triu", out, x), out.raw_data(), x.raw_data(), on.stream());
}

// Every index in [0, x.size(dim)), else the CPU's error.
void check_index(std::string_view op, const Tensor& index, int64_t dim, const Tensor& x, cudaStream_t stream) {
  Tensor scratch = Tensor::empty({1}, {DType::i64, index.device()});
  BadId bad = find_bad_id(static_cast<const int64_t*>(index.raw_data()), index.numel(), x.size(dim), 0, false,
                          scratch.raw_data(), stream);
  LOOM_CHECK(bad.position < 0, "{}: index {} is out of range for dim {} of size {} (shape {})", op, bad.id, dim,
             x.size(dim), x.shape());
}

template <bool PerElement, typename T>
void index_read(const Tensor& out, const Tensor& x, int64_t dim, const Tensor& index) {
  OnDevice on(out);
  const char* op = PerElement ? "gather" : "index_select";
  check_index(op, index, dim, x, on.stream());
  launch_index_read<T>(PerElement, static_cast<int>(dim), box_of(op, out, x), out.raw_data(), x.raw_data(),
                       static_cast<const int64_t*>(index.raw_data()), on.stream());
}

template <bool PerElement, typename T>
void index_accumulate(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src) {
  OnDevice on(out);
  const char* op = PerElement ? "scatter_add" : "index_add";
  check_index(op, index, dim, out, on.stream());
  LOOM_CHECK(src.dim() <= kMaxDims, "{}: the CUDA kernels take at most {} dims, got {}", op, kMaxDims, src.dim());
  AccumulateBox b;
  b.ndim = static_cast<int>(src.dim());
  b.dim = static_cast<int>(dim);
  b.positions = src.size(dim);
  b.work = b.positions == 0 ? 0 : src.numel() / b.positions * out.size(dim);
  for (int d = 0; d < b.ndim; ++d) {
    b.sizes[d] = d == b.dim ? out.size(d) : src.size(d);
    b.out_strides[d] = out.stride(d);
    b.src_strides[d] = src.stride(d);
  }
  launch_index_accumulate<T>(PerElement, b, out.raw_data(), src.raw_data(),
                             static_cast<const int64_t*>(index.raw_data()), on.stream());
}

// dst (a view) = src, same dtype, through the copy kernel.
template <typename T>
void copy_into(const Tensor& dst, const Tensor& src, cudaStream_t stream) {
  launch_cast<T>(element_type(dst.dtype()), strided<2>("copy", dst.shape(), {dst.strides(), src.strides()}),
                 dst.raw_data(), src.raw_data(), stream);
}

template <typename T>
void pad(const Tensor& out, const Tensor& x, const Shape& left, double value) {
  OnDevice on(out);
  const T fill_value = static_cast<T>(value);
  launch_fill(out.raw_data(), &fill_value, sizeof(T), static_cast<size_t>(out.numel()), on.stream());
  int64_t offset = out.offset();
  for (int64_t d = 0; d < x.dim(); ++d) offset += left[d] * out.stride(d);
  copy_into<T>(Tensor::make_view(out, x.shape(), out.strides(), offset), x, on.stream());
}

template <typename T>
void cat(const Tensor& out, const std::vector<Tensor>& inputs, int64_t dim) {
  OnDevice on(out);
  int64_t offset = 0;
  for (const Tensor& t : inputs) {
    if (t.size(dim) > 0)
      copy_into<T>(Tensor::make_view(out, t.shape(), out.strides(), out.offset() + offset * out.stride(dim)), t,
                   on.stream());
    offset += t.size(dim);
  }
}

template <typename... Ts>
void register_all(TypeList<Ts...>) {
  (register_kernel<kernels::TriangleKernel>("triu", DeviceType::cuda, dtype_of<Ts>(), triangle<true, Ts>), ...);
  (register_kernel<kernels::TriangleKernel>("tril", DeviceType::cuda, dtype_of<Ts>(), triangle<false, Ts>), ...);
  (register_kernel<kernels::IndexReadKernel>("gather", DeviceType::cuda, dtype_of<Ts>(), index_read<true, Ts>), ...);
  (register_kernel<kernels::IndexReadKernel>("index_select", DeviceType::cuda, dtype_of<Ts>(), index_read<false, Ts>),
   ...);
  (register_kernel<kernels::PadKernel>("pad", DeviceType::cuda, dtype_of<Ts>(), pad<Ts>), ...);
  (register_kernel<kernels::CatKernel>("cat", DeviceType::cuda, dtype_of<Ts>(), cat<Ts>), ...);
}

}  // namespace

template <typename... Ts>
void register_accumulate(TypeList<Ts...>) {
  (register_kernel<kernels::IndexAccumulateKernel>("index_add", DeviceType::cuda, dtype_of<Ts>(),
                                                   index_accumulate<false, Ts>),
   ...);
  (register_kernel<kernels::IndexAccumulateKernel>("scatter_add", DeviceType::cuda, dtype_of<Ts>(),
                                                   index_accumulate<true, Ts>),
   ...);
}

LOOM_KERNELS(cuda_shape_ops) {
  register_all(All{});
  register_accumulate(Numeric{});
}

}  // namespace loom::cuda
