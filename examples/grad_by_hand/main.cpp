// A gradient by hand and by machine: y = sum(x * x), so dy/dx = 2x.
#include <fmt/core.h>

#include <loom/gradcheck.h>
#include <loom/ops.h>

int main() {
  auto x = loom::tensor({1.0, 2.0, 3.0}, loom::f64);
  x.requires_grad_();
  auto y = (x * x).sum();
  y.backward();
  fmt::print("x            = {}\n", x);
  fmt::print("y = sum(x*x) = {}\n", y);
  fmt::print("dy/dx        = {}   (by hand: 2x = [2, 4, 6])\n", x.grad());

  // And by finite differences, the way the gradient-check suite does it.
  auto check =
      loom::gradcheck([](const std::vector<loom::Tensor>& in) { return std::vector{(in[0] * in[0]).sum()}; }, {x});
  fmt::print("gradcheck: max abs error {:.2e} -> {}\n", check.max_abs_error, check.passed ? "pass" : "FAIL");
  auto expected = std::vector<double>{2, 4, 6};
  return check.passed && x.grad().to_vector<double>() == expected ? 0 : 1;
}
