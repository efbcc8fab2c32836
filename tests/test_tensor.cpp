// Tensor basics: creation, dtypes, element access, casts, printing.
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <limits>

#include "loom/backend.h"
#include "loom/ops.h"

using namespace loom;

TEST_CASE("creation: shape, strides, dtype, device, numel") {
  Tensor t = zeros({2, 3, 4}, {f64});
  CHECK(t.shape() == Shape{2, 3, 4});
  CHECK(t.strides() == Shape{12, 4, 1});
  CHECK(t.dtype() == f64);
  CHECK(t.device() == kCPU);
  CHECK(t.numel() == 24);
  CHECK(t.is_contiguous());
  CHECK(t.size(-1) == 4);
  Tensor s = scalar_tensor(2.5);
  CHECK(s.dim() == 0);
  CHECK(s.numel() == 1);
  CHECK(s.item<float>() == 2.5f);
  CHECK(arange(5).to_vector<int64_t>() == std::vector<int64_t>{0, 1, 2, 3, 4});
  CHECK(full({2}, 7, {i32}).to_vector<int32_t>() == std::vector<int32_t>{7, 7});
  CHECK(ones_like(t).to_vector<double>() == std::vector<double>(24, 1.0));
  Tensor e = zeros({0, 3});
  CHECK(e.numel() == 0);
  CHECK(sum(e, {0}).to_vector<float>() == std::vector<float>{0, 0, 0});
}

TEST_CASE("explicit casts between the four dtypes") {
  Tensor x = tensor({1.75, -2.5, 3.0}, f64);
  CHECK(to_dtype(x, f32).to_vector<float>() == std::vector<float>{1.75f, -2.5f, 3.0f});
  CHECK(to_dtype(x, i64).to_vector<int64_t>() == std::vector<int64_t>{1, -2, 3});  // truncation, as in C++
  CHECK(to_dtype(to_dtype(x, i32), f64).to_vector<double>() == std::vector<double>{1, -2, 3});
  CHECK(to_dtype(x, b8).to_vector<bool>() == std::vector<bool>{true, true, true});
  CHECK(x.to(f32).dtype() == f32);
}

TEST_CASE("bfloat16: round to nearest even, NaN and infinity kept, printing, no arithmetic without a kernel") {
  // 1 + 2^-8 lies halfway between bf16 neighbours 1 and 1 + 2^-7: ties go to the even one (1).
  CHECK(bfloat16(1.0f + 0x1p-8f).bits == 0x3f80);
  // 1 + 3*2^-8 lies halfway between 1 + 2^-7 (odd) and 1 + 2^-6 (even): rounds up.
  CHECK(bfloat16(1.0f + 3 * 0x1p-8f).bits == 0x3f82);
  CHECK(bfloat16(1.0f + 0x1p-8f + 0x1p-20f).bits == 0x3f81);  // past halfway: up
  CHECK(static_cast<float>(bfloat16(-2.5f)) == -2.5f);
  CHECK(std::isnan(static_cast<float>(bfloat16(std::numeric_limits<float>::quiet_NaN()))));
  CHECK(std::isnan(static_cast<float>(bfloat16(std::bit_cast<float>(0x7f800001u)))));  // a NaN never rounds to inf
  CHECK(std::isinf(static_cast<float>(bfloat16(std::numeric_limits<float>::infinity()))));
  CHECK(std::isinf(static_cast<float>(bfloat16(3.4e38f))));  // past bf16's largest finite: overflows as RNE says

  Tensor x = tensor({1.0 + 0x1p-8, -2.5, 3.0, 1e-3});
  Tensor b = to_dtype(x, bf16);
  CHECK(b.dtype() == bf16);
  CHECK(dtype_size(bf16) == 2);
  CHECK(to_dtype(b, f32).to_vector<float>() ==
        std::vector<float>{1.0f, -2.5f, 3.0f, static_cast<float>(bfloat16(1e-3f))});
  CHECK(to_dtype(b, i64).to_vector<int64_t>() == std::vector<int64_t>{1, -2, 3, 0});
  CHECK(tensor({0.5, 2.0}, bf16).str() == "tensor([0.5000, 2.0000], dtype=bfloat16)");
  CHECK(full({2}, 3.0, {bf16}).to_vector<float>() == std::vector<float>{3.0f, 3.0f});
  std::string message;
  try {
    (void)(b + b);
  } catch (const Error& e) {
    message = e.what();
  }
  CHECK(message.find("no kernel for") != std::string::npos);
  CHECK(message.find("bfloat16") != std::string::npos);
}

TEST_CASE("arithmetic on integers stays integer; int64 sums exactly") {
  Tensor a = from_vector<int64_t>({1, 2, 3}, {3}, {i64});
  CHECK((a * a).to_vector<int64_t>() == std::vector<int64_t>{1, 4, 9});
  Tensor big = full({1000}, 3e12, {i64});
  CHECK(sum(big).item<int64_t>() == 3000000000000000);
}

TEST_CASE("printing looks like PyTorch") {
  CHECK(tensor({1.0, 2.0, 3.0}, f64).str() == "tensor([1., 2., 3.], dtype=float64)");
  CHECK(tensor({{1.5, -2.0}, {3.25, 4.0}}).str() == "tensor([[ 1.5000, -2.0000],\n        [ 3.2500,  4.0000]])");
  Tensor x = tensor({1.0, 2.0}, f64);
  x.requires_grad_();
  CHECK(x.str() == "tensor([1., 2.], dtype=float64, requires_grad=True)");
  CHECK((x * x).str() == "tensor([1., 4.], dtype=float64, grad_fn=<mul>)");
  CHECK(arange(3).str() == "tensor([0, 1, 2])");
  CHECK(scalar_tensor(0.5).str() == "tensor(0.5000)");
  CHECK(tensor({1e-6, 1.0}).str() == "tensor([1.0000e-06, 1.0000e+00])");
  std::string big = arange(2000).str();
  CHECK(big.find("...") != std::string::npos);
  CHECK(big.find("shape [2000]") != std::string::npos);
  CHECK(fmt::format("{}", tensor({1.0})) == "tensor([1.])");
}

TEST_CASE("item and to_vector read through strides") {
  Tensor m = tensor({{1, 2, 3}, {4, 5, 6}});
  CHECK(m.t().to_vector<float>() == std::vector<float>{1, 4, 2, 5, 3, 6});
  CHECK(m.select(1, 2).to_vector<float>() == std::vector<float>{3, 6});
  CHECK(m.select(0, 1).select(0, 0).item<double>() == 4.0);
}

TEST_CASE("devices: CUDA tensors need a CUDA backend") {
  if (has_backend(DeviceType::cuda)) return;  // covered by the CUDA suite
  CHECK_THROWS_WITH_AS(Tensor::empty({2}, {f32, Device::cuda(0)}), doctest::Contains("no backend for cuda"), Error);
}

TEST_CASE("from_vector without options takes the dtype from the element type") {
  CHECK(from_vector(std::vector<double>{0.1, 0.2}, {2}).dtype() == DType::f64);
  CHECK(from_vector(std::vector<double>{0.1, 0.2}, {2}).to_vector<double>()[0] == 0.1);  // not rounded to float
  CHECK(from_vector(std::vector<float>{1, 2}, {2}).dtype() == DType::f32);
  CHECK(from_vector(std::vector<int64_t>{1, 2}, {2}).dtype() == DType::i64);
  CHECK(from_vector(std::vector<double>{1, 2}, {2}, {DType::f32}).dtype() == DType::f32);  // asked for: converted
}
