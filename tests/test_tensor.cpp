// Tensor basics: creation, dtypes, element access, casts, printing.
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <limits>

#include "loom/backend.h"
#include "loom/ops.h"
#include "loom/standin.h"

using namespace loom;

#define CHECK_ERROR(expr, text) CHECK_THROWS_WITH_AS(expr, doctest::Contains(text), Error)

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

TEST_CASE("floats into integers: truncated toward zero, NaN 0, out of range saturated (CUDA's rule), any device") {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<double> values = {nan, inf, -inf, 3e9, -3e9, 2.7, -2.7, 1e19, -1e19};
  const int32_t i32_max = std::numeric_limits<int32_t>::max(), i32_min = std::numeric_limits<int32_t>::min();
  const int64_t i64_max = std::numeric_limits<int64_t>::max(), i64_min = std::numeric_limits<int64_t>::min();
  enable_standin_device();
  for (Device device : {kCPU, Device::standin()})
    for (DType from : {f32, f64, bf16}) {
      CAPTURE(device);
      CAPTURE(dtype_name(from));
      const Tensor x = to_dtype(from_vector(values, {static_cast<int64_t>(values.size())}, {f64}), from).to(device);
      CHECK(to_dtype(x, i32).to(kCPU).to_vector<int32_t>() ==
            std::vector<int32_t>{0, i32_max, i32_min, i32_max, i32_min, 2, -2, i32_max, i32_min});
      const std::vector<int64_t> wide = to_dtype(x, i64).to(kCPU).to_vector<int64_t>();
      CHECK(std::vector<int64_t>(wide.begin(), wide.begin() + 3) == std::vector<int64_t>{0, i64_max, i64_min});
      CHECK(std::vector<int64_t>(wide.begin() + 5, wide.end()) == std::vector<int64_t>{2, -2, i64_max, i64_min});
      if (from != bf16) {  // 3e9 is exact in float32 and float64, not in bfloat16
        CHECK(wide[3] == 3000000000);
        CHECK(wide[4] == -3000000000);
      }
    }
}

TEST_CASE(
    "bfloat16: round to nearest even, NaN and infinity kept, printing, arithmetic in float32, none without a kernel") {
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
  // Elementwise arithmetic: float32's on the widened values, rounded once.
  Tensor sum = b + tensor({0x1p-9, 0.0, 1.0, 1.0}, bf16);
  CHECK(sum.dtype() == bf16);
  CHECK(to_dtype(sum, f32).to_vector<float>() ==
        std::vector<float>{1.0f, -2.5f, 4.0f, static_cast<float>(bfloat16(1.0f + float(bfloat16(1e-3f))))});
  std::string message;
  try {
    (void)b.logsumexp();
  } catch (const Error& e) {
    message = e.what();
  }
  CHECK(message.find("no kernel for") != std::string::npos);
  CHECK(message.find("bfloat16") != std::string::npos);
}

TEST_CASE("type promotion as PyTorch's: the higher kind wins, a 0-d operand gives way within its kind") {
  CHECK(promote_types(i64, f32) == f32);
  CHECK(promote_types(b8, i32) == i32);
  CHECK(promote_types(bf16, f32) == f32);
  CHECK(promote_types(i32, i64) == i64);
  CHECK(promote_types(f32, f64) == f64);
  Tensor ints = from_vector<int64_t>({1, 2}, {2}, {i64});
  CHECK((ints + scalar_tensor(0.5, {f32})).to_vector<float>() == std::vector<float>{1.5f, 2.5f});
  CHECK((ints + scalar_tensor(0.5, {f64})).dtype() == f64);                     // a higher kind: its dtype
  CHECK((tensor({1.0, 2.0}, f32) * scalar_tensor(3.0, {f64})).dtype() == f32);  // the same kind: gives way
  CHECK((tensor({1.0, 2.0}, f32) * tensor({3.0, 4.0}, f64)).dtype() == f64);
  CHECK((tensor({1.5, 2.5}, f32) * to_dtype(tensor({1.0, 0.0}, f64), b8)).to_vector<float>() ==
        std::vector<float>{1.5f, 0.0f});
  CHECK(lt(ints, scalar_tensor(1.5, {f32})).to_vector<bool>() == std::vector<bool>{true, false});
  CHECK(maximum(ints, tensor({1.5, 1.5}, f64)).to_vector<double>() == std::vector<double>{1.5, 2.0});
}

TEST_CASE("division is true division: integers divide as float32, by zero too, and never trap") {
  Tensor a = from_vector<int64_t>({7, -7, 0, std::numeric_limits<int64_t>::min()}, {4}, {i64});
  Tensor b = from_vector<int64_t>({2, 0, 0, -1}, {4}, {i64});
  Tensor q = div(a, b);
  CHECK(q.dtype() == f32);
  std::vector<float> v = q.to_vector<float>();
  CHECK(v[0] == 3.5f);
  CHECK((std::isinf(v[1]) && v[1] < 0));
  CHECK(std::isnan(v[2]));
  CHECK(v[3] == 0x1p63f);
  CHECK(div(from_vector<int32_t>({7}, {1}, {i32}), from_vector<int32_t>({0}, {1}, {i32})).item<float>() ==
        std::numeric_limits<float>::infinity());
}

TEST_CASE("a 0-d tensor reduces over dim 0 or -1 (its one element), as PyTorch; other dims are errors") {
  Tensor x = scalar_tensor(1.5, {f64});
  for (int64_t dim : {0, -1}) {
    CHECK(sum(x, dim).item<double>() == 1.5);
    CHECK(sum(x, dim, true).dim() == 0);
    CHECK(mean(x, dim).item<double>() == 1.5);
    CHECK(amax(x, dim).item<double>() == 1.5);
    CHECK(logsumexp(x, Shape{dim}).item<double>() == 1.5);
    CHECK(squeeze(x, dim).dim() == 0);
    CHECK(argmax(x, dim).item<int64_t>() == 0);
    CHECK(max(x, dim).values.item<double>() == 1.5);
  }
  CHECK(std::isnan(var(x, 0).item<double>()));  // one element, correction 1: 0 / 0, as PyTorch
  CHECK_ERROR(sum(x, 1), "sum: dim 1 is out of range for a 0-d tensor (0 and -1 name its element)");
  CHECK_ERROR(x.size(0), "size: dim 0 is out of range for a 0-d tensor (it has no dims)");
  CHECK_ERROR(transpose(x, 0, 0), "transpose: dim 0 is out of range for a 0-d tensor");
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
