#include <cmath>
#include <cstdint>
#include <limits>

#include "block_reduce.cuh"
#include "kernel_errors.h"
#include "loom/bfloat16.h"
#include "reduce_launch.h"

namespace loom::cuda {

namespace {

// Each reducer: an accumulator, add(acc, value, index), merge(left, right) with
// left holding lower indices, finish(acc) -> output. The CPU's reducers
// (ops/cpu/sum.cpp, amax.cpp, ...) in device form.
template <typename T>
struct SumReducer {
  using Acc = std::conditional_t<std::is_integral_v<T>, int64_t, double>;  // bfloat16 too: in double
  using Out = T;
  __device__ Acc init() const { return Acc(0); }
  __device__ void add(Acc& acc, T v, int64_t) const { acc += v; }
  __device__ Acc merge(Acc a, Acc b) const { return a + b; }
  __device__ Out finish(Acc acc) const { return static_cast<T>(acc); }
};

template <typename T>
struct SquareSumReducer {
  using Acc = double;
  using Out = T;
  double divisor;
  __device__ Acc init() const { return 0; }
  __device__ void add(Acc& acc, T v, int64_t) const { acc += static_cast<double>(v) * static_cast<double>(v); }
  __device__ Acc merge(Acc a, Acc b) const { return a + b; }
  // Sum of squares cast to T, then divided in T (the CPU's var).
  __device__ Out finish(Acc acc) const { return static_cast<T>(acc) / static_cast<T>(divisor); }
};

// Where a running max (Largest) or min starts: beaten by every value.
template <typename T, bool Largest>
__device__ T worst() {
  using limits = std::numeric_limits<T>;
  if constexpr (!limits::has_infinity)
    return Largest ? limits::lowest() : limits::max();
  else
    return Largest ? -limits::infinity() : limits::infinity();
}
template <bool Largest, typename T>
__device__ bool beats(T v, T best) {
  return Largest ? v > best : v < best;
}
template <typename T>
__device__ bool is_nan(T v) {
  return v != v;
}

// amax (Largest) and amin: NaN wins and stays (PyTorch's).
template <typename T, bool Largest>
struct ExtremeReducer {
  using Acc = T;
  using Out = T;
  __device__ Acc init() const { return worst<T, Largest>(); }
  __device__ void add(Acc& acc, T v, int64_t) const { acc = (beats<Largest>(v, acc) || is_nan(v)) ? v : acc; }
  __device__ Acc merge(Acc a, Acc b) const { return (beats<Largest>(b, a) || (is_nan(b) && !is_nan(a))) ? b : a; }
  __device__ Out finish(Acc acc) const { return acc; }
};

// argmax (Largest) and argmin: the first extreme (a NaN counts as one); index =
// position among the reduced elements.
template <typename T>
struct ArgExtremeAcc {
  T best;
  int64_t index;
};
template <typename T, bool Largest>
struct ArgExtremeReducer {
  using Acc = ArgExtremeAcc<T>;
  using Out = int64_t;
  __device__ static bool better(T v, T best) { return beats<Largest>(v, best) || (is_nan(v) && !is_nan(best)); }
  __device__ Acc init() const { return {worst<T, Largest>(), -1}; }
  __device__ void add(Acc& acc, T v, int64_t i) const {
    if (acc.index < 0 || better(v, acc.best)) acc = {v, i};  // a thread's indices rise: ties keep the first
  }
  __device__ Acc merge(Acc a, Acc b) const {
    if (b.index < 0) return a;
    if (a.index < 0) return b;
    if (better(b.best, a.best)) return b;
    if (better(a.best, b.best)) return a;
    return b.index < a.index ? b : a;  // equal (or both NaN): the first position
  }
  __device__ Out finish(Acc acc) const { return acc.index < 0 ? 0 : acc.index; }
};

// Running (max, sum of exp(v - max)) in double (the CPU's logsumexp).
struct LogSumExpAcc {
  double max, sum;
};
template <typename T>
struct LogSumExpReducer {
  using Acc = LogSumExpAcc;
  using Out = T;
  __device__ Acc init() const { return {-INFINITY, 0.0}; }
  __device__ void add(Acc& acc, T value, int64_t) const {
    double v = value;
    if (v > acc.max) {
      acc.sum = acc.sum * exp(acc.max - v) + 1;
      acc.max = v;
    } else {
      acc.sum += v == acc.max ? 1 : exp(v - acc.max);
    }
  }
  __device__ Acc merge(Acc a, Acc b) const {
    if (b.max > a.max) return {b.max, a.sum * exp(a.max - b.max) + b.sum};
    return {a.max, a.sum + (b.max == a.max ? b.sum : b.sum * exp(b.max - a.max))};
  }
  __device__ Out finish(Acc acc) const { return static_cast<T>(acc.max + log(acc.sum)); }
};

template <typename T, typename R>
__global__ void reduce_kernel(ReduceShape s, typename R::Out* out, const T* x, R reducer) {
  using Acc = typename R::Acc;
  __shared__ Acc scratch[kMaxBlockThreads];
  for (int64_t o = blockIdx.x; o < s.outputs; o += gridDim.x) {
    const T* base = x + walk_offset(o, s.outer_ndim, s.outer_sizes, s.outer_strides);
    Acc acc = reducer.init();
    for (int64_t r = threadIdx.x; r < s.reduced; r += blockDim.x)
      reducer.add(acc, base[walk_offset(r, s.inner_ndim, s.inner_sizes, s.inner_strides)], r);
    acc = block_combine(acc, scratch, [&](Acc a, Acc b) { return reducer.merge(a, b); });
    if (threadIdx.x == 0) out[o] = reducer.finish(acc);
  }
}

template <typename T, typename R>
void run(const ReduceShape& s, void* out, const void* x, R reducer, cudaStream_t stream) {
  if (s.outputs == 0) return;
  const int threads = row_threads(s.reduced);
  const int64_t blocks = s.outputs < kMaxBlocks ? s.outputs : kMaxBlocks;
  reduce_kernel<<<blocks, threads, 0, stream>>>(s, static_cast<typename R::Out*>(out), static_cast<const T*>(x),
                                                reducer);
  check_kernel_launch("reduce_kernel");
}

template <typename T>
__global__ void non_finite_kernel(Strided<1> s, const T* x, int* found) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < s.numel; i += int64_t(gridDim.x) * blockDim.x) {
    int64_t off[1];
    strided_offsets(s, i, off);
    if (!isfinite(x[off[0]])) *found = 1;  // any writer stores the same 1: no race on the answer
  }
}

}  // namespace

template <typename T>
void launch_reduce(Reduction r, const ReduceShape& s, void* out, const void* x, double divisor, cudaStream_t stream) {
  if constexpr (std::is_same_v<T, bfloat16>) {  // bfloat16 values are summed (gradients), not searched
    if (r == Reduction::sum) return run<T>(s, out, x, SumReducer<T>{}, stream);
    return fail_kernel("a reduction other than sum was launched for bfloat16");
  }
  switch (r) {
    case Reduction::sum: return run<T>(s, out, x, SumReducer<T>{}, stream);
    case Reduction::amax: return run<T>(s, out, x, ExtremeReducer<T, true>{}, stream);
    case Reduction::amin: return run<T>(s, out, x, ExtremeReducer<T, false>{}, stream);
    case Reduction::argmax: return run<T>(s, out, x, ArgExtremeReducer<T, true>{}, stream);
    case Reduction::argmin: return run<T>(s, out, x, ArgExtremeReducer<T, false>{}, stream);
    case Reduction::logsumexp:
      if constexpr (std::is_floating_point_v<T>) return run<T>(s, out, x, LogSumExpReducer<T>{}, stream);
      break;
    case Reduction::square_sum:
      if constexpr (std::is_floating_point_v<T>) return run<T>(s, out, x, SquareSumReducer<T>{divisor}, stream);
      break;
  }
  fail_kernel("a reduction was launched for an element type it is not compiled for");
}

template <typename T>
bool any_non_finite(const Strided<1>& s, const void* x, void* scratch, cudaStream_t stream) {
  if (s.numel == 0) return false;
  int* found = static_cast<int*>(scratch);
  check_kernel_call(cudaMemsetAsync(found, 0, sizeof(int), stream), "cudaMemsetAsync");
  non_finite_kernel<<<blocks_for(s.numel), kThreads, 0, stream>>>(s, static_cast<const T*>(x), found);
  check_kernel_launch("non_finite_kernel");
  int host = 0;
  check_kernel_call(cudaMemcpyAsync(&host, found, sizeof(int), cudaMemcpyDeviceToHost, stream), "cudaMemcpyAsync");
  check_kernel_call(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  return host != 0;
}

template void launch_reduce<float>(Reduction, const ReduceShape&, void*, const void*, double, cudaStream_t);
template void launch_reduce<double>(Reduction, const ReduceShape&, void*, const void*, double, cudaStream_t);
template void launch_reduce<int32_t>(Reduction, const ReduceShape&, void*, const void*, double, cudaStream_t);
template void launch_reduce<int64_t>(Reduction, const ReduceShape&, void*, const void*, double, cudaStream_t);
template void launch_reduce<bfloat16>(Reduction, const ReduceShape&, void*, const void*, double, cudaStream_t);
template bool any_non_finite<float>(const Strided<1>&, const void*, void*, cudaStream_t);
template bool any_non_finite<double>(const Strided<1>&, const void*, void*, cudaStream_t);

}  // namespace loom::cuda
