#pragma once
// Numerical gradient checks in float64, and the test matrix built from the registry.
#include <functional>
#include <string>
#include <vector>

#include "loom/registry.h"

namespace loom {

// Fixed tolerances, the same for every op (PyTorch's gradcheck defaults):
// central differences with step kEps; an entry passes when
// |analytic - numeric| <= kAtol + kRtol * |numeric|.
struct GradcheckTolerance {
  double eps = 1e-6;
  double atol = 1e-5;
  double rtol = 1e-3;
};

struct CheckResult {
  std::string op;
  std::string sample;
  std::string check;    // "gradcheck", "gradgradcheck", "noncontiguous", "broadcast", "composed", "reference",
                        // "reference32", "device" (every non-CPU device with a backend, against the CPU)
  double max_abs_error = 0;
  double max_rel_error = 0;
  bool passed = true;
  std::string message;  // why it failed
};

using MultiFn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

// Compares the Jacobian from backward() with central differences, for every
// floating input that requires grad.
CheckResult gradcheck(const MultiFn& fn, const std::vector<Tensor>& inputs, GradcheckTolerance tol = {});
// gradcheck of the backward pass itself: (inputs, v) -> d(sum(fn(inputs) * v))/d(inputs).
CheckResult gradgradcheck(const MultiFn& fn, const std::vector<Tensor>& inputs, GradcheckTolerance tol = {});

// Draws a sample's inputs (float64 unless stated), deterministically from the op name.
std::vector<Tensor> make_inputs(const OpInfo& op, const Sample& sample, size_t sample_index);

// The whole matrix for one op; every check of every sample, in a stable order.
std::vector<CheckResult> check_op(const OpInfo& op);

}  // namespace loom
