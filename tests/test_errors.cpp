// Misuse gives a loom::Error whose message names the op and what was wrong.
#include <doctest/doctest.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "loom/backend.h"
#include "loom/interrupt.h"
#include "loom/kernel_table.h"
#include "loom/standin.h"
#include "loom/ops.h"

using namespace loom;

#define CHECK_ERROR(expr, text) CHECK_THROWS_WITH_AS(expr, doctest::Contains(text), Error)

TEST_CASE("shape errors name the op and both shapes") {
  CHECK_ERROR(zeros({2, 3}) * zeros({4}), "mul: shapes [2, 3] and [4] cannot be broadcast (dim 1 is 3 vs 4)");
  CHECK_ERROR(matmul(zeros({2, 3}), zeros({4, 5})),
              "matmul: shapes [2, 3] and [4, 5] are not aligned: a has 3 columns but b has 4 rows");
  CHECK_ERROR(matmul(zeros({2, 2, 3}), zeros({3, 3, 1})),
              "matmul (batch dims): shapes [2] and [3] cannot be broadcast");
  CHECK_ERROR(zeros({2, 3}).reshape({4}), "reshape: shape [4] is invalid for input of shape [2, 3] (6 elements)");
  CHECK_ERROR(zeros({2, 3}).expand({2, 4}), "expand: cannot expand shape [2, 3] to [2, 4]");
  CHECK_ERROR(zeros({2, 3}).permute({0}), "permute: 1 dims given for a tensor of shape [2, 3]");
  CHECK_ERROR(zeros({2, 3}).permute({0, 0}), "permute: dim 0 repeated");
  CHECK_ERROR(zeros({2, 3}).narrow(1, 2, 2), "narrow: [2, 4) is out of range for dim 1 of size 3 (shape [2, 3])");
  CHECK_ERROR(zeros({2, 3}).select(0, 5), "select: index 5 is out of range for dim 0 of size 2");
  CHECK_ERROR(sum(zeros({2, 3}), {2}), "sum: dim 2 is out of range for a tensor with 2 dims");
  CHECK_ERROR(sum(zeros({2, 3}), {1, -1}), "sum: dim listed twice");
  CHECK_ERROR(zeros({2, 3}).item<float>(), "item: tensor of shape [2, 3] has 6 elements, expected 1");
  CHECK_ERROR(from_vector<float>({1, 2, 3}, {2, 2}), "from_vector: 3 values do not fill shape [2, 2]");
}

TEST_CASE("sizes whose product overflows 64 bits are errors, not small buffers") {
  const int64_t big = int64_t{1} << 32, huge = (int64_t{1} << 62) + 1;
  CHECK_ERROR(zeros({big, big}), "shape [4294967296, 4294967296] has more elements than a 64-bit count holds");
  CHECK_ERROR(zeros({huge, 4}), "has more elements than a 64-bit count holds");
  // Elements that fit, bytes that do not.
  CHECK_ERROR(zeros({int64_t{1} << 62}, {f64}), "empty: shape [4611686018427387904] of float64 needs more bytes");
  // A zero size makes an empty tensor, but its strides still need the rest to fit.
  CHECK(zeros({0, big}).numel() == 0);
  CHECK_ERROR(zeros({0, big, big}), "more elements than a 64-bit count holds");
}

TEST_CASE("dtypes mix only where PyTorch promotes them (arithmetic, comparisons, where)") {
  CHECK((zeros({2}, {f32}) + zeros({2}, {f64})).dtype() == f64);
  CHECK_ERROR(matmul(zeros({2, 2}, {f32}), zeros({2, 2}, {f64})), "matmul: ");
  CHECK_ERROR(matmul(zeros({2, 2}, {i64}), zeros({2, 2}, {i64})), "matmul: expected float32 or float64, got int64");
  CHECK_ERROR(exp(zeros({2}, {i32})), "exp: expected a floating dtype (float32, float64 or bfloat16), got int32");
  CHECK_ERROR(zeros({2}, {i64}).requires_grad_(), "requires_grad_: only floating tensors can require gradients");
  CHECK_ERROR(zeros({2}, {f32}).data<double>(), "data<float64>(): tensor has dtype float32");
}

TEST_CASE("autograd misuse") {
  Tensor x = zeros({2}, {f64});
  CHECK_ERROR(x.backward(), "backward: tensor does not require grad");
  x.requires_grad_();
  Tensor y = x * 2.0;
  CHECK_ERROR(y.requires_grad_(false), "requires_grad_: only leaf tensors can be marked; this one comes from mul");
  CHECK_ERROR(y.backward(), "gradient can be implicitly created only for scalar outputs");
  CHECK_ERROR(y.backward(zeros({3}, {f64})),
              "grad: seed gradient [3] float64 cpu does not match output [2] float64 cpu");
  CHECK_ERROR(y.set_grad(zeros({2}, {f32})), "set_grad: gradient [2] float32 does not match tensor [2] float64");
}

TEST_CASE("an undefined tensor is an error, not a crash") {
  Tensor undefined;
  CHECK_FALSE(undefined.defined());
  CHECK_ERROR(undefined.shape(), "use of an undefined tensor");
  CHECK_ERROR(exp(undefined), "use of an undefined tensor");
}

TEST_CASE("the gradient check refuses non-float64 inputs") {
  Tensor x = zeros({2}, {f32});
  x.requires_grad_();
  CHECK_ERROR(loom::grad({x * x}, {x}), "grad: output 0 has shape [2]; a non-scalar output needs a grad_output");
}

namespace {
// A device with memory and copies but no kernels (what a new backend is before
// its kernels are registered).
class KernelLessBackend final : public HostBackend {
 public:
  Allocator& allocator(int) override { return allocator_; }
  bool host_accessible() const override { return false; }

 private:
  HostCachingAllocator allocator_;
};
}  // namespace

TEST_CASE("mixing devices in one op is an error naming both devices") {
  enable_standin_device();
  Tensor on_cpu = ones({2, 3});
  Tensor elsewhere = on_cpu.to(Device::standin(0));
  CHECK(elsewhere.device() == Device::standin(0));
  CHECK(elsewhere.to(kCPU).to_vector<float>() == std::vector<float>(6, 1.0f));  // copies both ways
  CHECK_ERROR(on_cpu + elsewhere,
              "add: operands are on different devices (cpu of shape [2, 3] and standin:0 of shape [2, 3])");
  CHECK_ERROR(matmul(on_cpu, elsewhere.t()),
              "matmul: operands are on different devices (cpu of shape [2, 3] and standin:0 of shape [3, 2])");
  CHECK_ERROR(copy_(on_cpu, elsewhere), "copy_: destination is on cpu and source on standin:0; use to_device");
  // Its memory is for kernels only: reading it from host code is refused.
  CHECK_ERROR(elsewhere.data<float>(), "memory of standin:0 touched outside a kernel");
}

TEST_CASE("a device without a kernel for an op says so, naming op, device and dtype") {
  if (has_backend(DeviceType::cuda)) return;  // a real GPU build: covered by the CUDA suite
  static KernelLessBackend kernel_less;
  register_backend(DeviceType::cuda, &kernel_less);
  {
    Tensor elsewhere = ones({2, 3}).to(Device::cuda(0));
    CHECK_FALSE(supports("exp", Device::cuda(0), DType::f32));
    CHECK(supports("exp", kCPU, DType::f32));
    CHECK_ERROR(exp(elsewhere), "exp: no kernel for device cuda:0 and dtype float32 in this build");
  }
  register_backend(DeviceType::cuda, nullptr);
}

TEST_CASE("request_interrupt: the next kernel call throws loom::Interrupted, once; clear_interrupt forgets it") {
  const Tensor a = ones({4});
  request_interrupt();
  CHECK_THROWS_AS(add(a, a), Interrupted);
  CHECK(add(a, a).sum().item<float>() == 8.0f);  // the request was consumed
  request_interrupt();
  clear_interrupt();
  CHECK_NOTHROW(add(a, a));
}

TEST_CASE("request_interrupt: a long kernel stops at its next block, and the call throws") {
  // A sum over a broadcast of 2^34 elements is one kernel call, 16 times as long as
  // one of 2^30 (T); requested after T, it must end well before 16 T.
  auto seconds_since = [](auto start) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  auto start = std::chrono::steady_clock::now();
  CHECK(sum(expand(ones({1}), {int64_t{1} << 30})).item<float>() > 0);
  const double t = seconds_since(start);
  start = std::chrono::steady_clock::now();
  std::thread requester([t] {
    std::this_thread::sleep_for(std::chrono::duration<double>(t));
    request_interrupt();
  });
  CHECK_THROWS_AS(sum(expand(ones({1}), {int64_t{1} << 34})), Interrupted);
  requester.join();
  const double seconds = seconds_since(start);
  MESSAGE("2^30 elements summed in ", t, " s; 2^34 interrupted after ", seconds, " s");
  CHECK(seconds < 5 * t);
  CHECK(sum(expand(ones({1}), {1000})).item<float>() == 1000.0f);  // the request was consumed
}

TEST_CASE("WholeKernels: kernels that write into given tensors are not stopped half way") {
  request_interrupt();
  {
    WholeKernels whole;  // as copy_, fill_ and the optimizer steps hold one
    CHECK_FALSE(detail::stop_kernel_early());
  }
  CHECK(detail::stop_kernel_early());
  clear_interrupt();
  CHECK_FALSE(detail::stop_kernel_early());
}
