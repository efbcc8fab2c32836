// Linked with loom::cuda: the CUDA backend registers itself when the program
// loads; a tensor goes to the GPU and back where there is one.
#include <fmt/core.h>

#include <loom/backend.h>
#include <loom/ops.h>

int main() {
  if (!loom::has_backend(loom::DeviceType::cuda)) {
    fmt::print("cuda backend: not registered (loom::cuda linked, but its library did not load)\n");
    return 1;
  }
  const int gpus = loom::backend(loom::DeviceType::cuda).device_count();
  fmt::print("cuda backend: registered, {} GPU(s)\n", gpus);
  if (gpus == 0) return 0;
  auto x = loom::tensor({1.0, 2.0, 3.0}, loom::f64);
  auto y = (x.to(loom::Device{loom::DeviceType::cuda, 0}) * 2).to(loom::kCPU);
  fmt::print("2x on the GPU = {}\n", y);
  return y.to_vector<double>() == std::vector<double>{2, 4, 6} ? 0 : 1;
}
