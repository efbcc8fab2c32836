// Views share storage; broadcasting follows NumPy; plain transposes are never copied.
#include <doctest/doctest.h>

#include "loom/backend.h"
#include "loom/ops.h"

using namespace loom;

namespace {
std::vector<float> values(const Tensor& t) { return t.to_vector<float>(); }
Tensor iota(const Shape& shape) { return to_dtype(arange(shape_numel(shape)), f32).reshape(shape); }
}  // namespace

TEST_CASE("views share storage: writes through one are seen by the others") {
  Tensor base = iota({3, 4});
  Tensor tr = base.t();
  Tensor row = base.select(0, 1);
  Tensor col = base.narrow(1, 2, 1);
  Tensor flat = base.reshape({12});
  Tensor wide = base.unsqueeze(0);
  for (const Tensor& v : {tr, row, col, flat, wide}) CHECK(v.storage() == base.storage());
  fill_(row, -1);
  CHECK(values(base) == std::vector<float>{0, 1, 2, 3, -1, -1, -1, -1, 8, 9, 10, 11});
  CHECK(values(tr.select(0, 0)) == std::vector<float>{0, -1, 8});
  copy_(col, full({3, 1}, 7));
  CHECK(values(flat) == std::vector<float>{0, 1, 7, 3, -1, -1, 7, -1, 8, 9, 7, 11});
}

TEST_CASE("strides and offsets of views") {
  Tensor x = iota({2, 3, 4});
  CHECK(x.permute({2, 0, 1}).strides() == Shape{1, 12, 4});
  CHECK(x.transpose(0, 2).shape() == Shape{4, 3, 2});
  Tensor s = x.slice(2, 1, 4, 2);
  CHECK(s.shape() == Shape{2, 3, 2});
  CHECK(s.strides() == Shape{12, 4, 2});
  CHECK(s.offset() == 1);
  CHECK(values(s.select(0, 0).select(0, 0)) == std::vector<float>{1, 3});
  Tensor e = iota({3, 1}).expand({2, 3, 5});
  CHECK(e.strides() == Shape{0, 1, 0});
  CHECK(e.shape() == Shape{2, 3, 5});
  CHECK(x.slice(1, -2, 100).shape() == Shape{2, 2, 4});  // Python-style clamping
  CHECK(x.squeeze(0).shape() == Shape{2, 3, 4});         // not size 1: unchanged
  CHECK(x.unsqueeze(-1).shape() == Shape{2, 3, 4, 1});
}

TEST_CASE("reshape views when it can and copies when it must; view never copies") {
  Tensor x = iota({4, 6});
  CHECK(x.reshape({2, 12}).storage() == x.storage());
  CHECK(x.reshape({-1}).shape() == Shape{24});
  Tensor t = x.t();
  CHECK_FALSE(t.is_contiguous());
  Tensor r = t.reshape({24});
  CHECK(r.storage() != x.storage());
  CHECK(values(r)[1] == 6.0f);                           // logical order of the transpose
  CHECK(t.reshape({6, 2, 2}).storage() == x.storage());  // splitting a dim is still a view
  CHECK_THROWS_WITH_AS(t.view({24}), doctest::Contains("use reshape"), Error);
  Tensor c = t.contiguous();
  CHECK(c.is_contiguous());
  CHECK(values(c) == values(t));
  CHECK(x.contiguous().storage() == x.storage());  // already contiguous: no copy
}

TEST_CASE("broadcasting: trailing dims align, size 1 stretches") {
  Tensor a = iota({2, 1, 3});
  Tensor b = iota({4, 1});
  Tensor c = a + b;
  CHECK(c.shape() == Shape{2, 4, 3});
  CHECK(c.select(0, 1).select(0, 2).to_vector<float>() == std::vector<float>{5, 6, 7});  // a[1,0,:] + b[2]
  CHECK((iota({3}) * scalar_tensor(2)).shape() == Shape{3});
  CHECK((scalar_tensor(1) - iota({2, 2})).to_vector<float>() == std::vector<float>{1, 0, -1, -2});
  CHECK_THROWS_WITH_AS(iota({2, 3}) + iota({2}), doctest::Contains("add: shapes [2, 3] and [2] cannot be broadcast"),
                       Error);
}

TEST_CASE("matmul of a plain transpose makes no copy: BLAS reads it transposed") {
  Tensor a = iota({64, 32});
  Tensor b = iota({64, 16});
  Allocator& cpu = allocator(kCPU);
  uint64_t before = cpu.stats().allocations;
  Tensor c = matmul(a.t(), b);                   // [32, 64] @ [64, 16]
  CHECK(cpu.stats().allocations - before == 1);  // the output, nothing else
  CHECK(values(c) == values(matmul(a.t().contiguous(), b)));
  CHECK(c.shape() == Shape{32, 16});
}
