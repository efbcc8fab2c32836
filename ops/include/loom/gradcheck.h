#pragma once
// Numerical gradient checks in float64, and the test matrix built from the registry.
#include <functional>
#include <string>
#include <vector>

#include "loom/registry.h"

namespace loom {

// Fixed tolerances, the same for every op (PyTorch's gradcheck defaults):
// central differences with step eps; an entry passes when
// |analytic - numeric| <= atol + rtol * |numeric|.
struct GradcheckOptions {
  double eps = 1e-6;
  double atol = 1e-5;
  double rtol = 1e-3;
  // PyTorch's fast mode: per differentiable input one number, v . J . u for a random
  // unit direction u and random output weights v, instead of the whole Jacobian (one
  // backward pass and two evaluations per input instead of one of each per element).
  // It runs the same forward and backward code; a wrong Jacobian entry shows unless
  // the random u, v happen to hide it. atol grows to atol * sum(u) * sum(v), the
  // entry-wise bound summed as the projection sums the entries.
  bool fast_mode = false;
};

struct CheckResult {
  std::string op;
  std::string sample;
  std::string check;  // "gradcheck", "gradgradcheck", "noncontiguous", "broadcast", "composed", "reference",
                      // "reference32", "device" (every non-CPU device with a backend, against the CPU)
  double max_abs_error = 0;
  double max_rel_error = 0;
  bool passed = true;
  std::string message;  // why it failed
};

using MultiFn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

// Both Jacobians of a check and its verdict: analytic[row][column] from backward()
// with a one-hot seed per output element (rows: every output element, in order),
// numeric from central differences; columns: the elements of each differentiable
// input in turn (`columns` says which input and how many). gradcheck is its verdict;
// `loom explain` prints the matrices, so both report the same numbers.
struct JacobianCheck {
  struct Columns {
    size_t input = 0;  // index into the inputs
    int64_t count = 0;
  };
  std::vector<Columns> columns;
  std::vector<std::vector<double>> analytic, numeric;
  CheckResult result;
};
JacobianCheck jacobian_check(const MultiFn& fn, const std::vector<Tensor>& inputs, GradcheckOptions tol = {});

// Compares the Jacobian from backward() with central differences, for every
// floating input that requires grad.
CheckResult gradcheck(const MultiFn& fn, const std::vector<Tensor>& inputs, GradcheckOptions tol = {});

// The backward pass as a function to check: (inputs, v) -> d(sum(fn(inputs) * v))/d(inputs),
// v a fixed random cotangent per differentiable output (appended to the inputs, itself differentiated).
struct BackwardProblem {
  MultiFn fn;
  std::vector<Tensor> inputs;
  size_t cotangents = 0;
};
BackwardProblem backward_problem(const MultiFn& fn, const std::vector<Tensor>& inputs);
// gradcheck of the backward pass itself (the second derivative).
JacobianCheck gradgrad_jacobian_check(const MultiFn& fn, const std::vector<Tensor>& inputs, GradcheckOptions tol = {});
CheckResult gradgradcheck(const MultiFn& fn, const std::vector<Tensor>& inputs, GradcheckOptions tol = {});

// Draws a sample's inputs (float64 unless stated), deterministically from the op name.
std::vector<Tensor> make_inputs(const OpInfo& op, const Sample& sample, size_t sample_index);
// The same as the leaves check_op differentiates (floating differentiable inputs require grad),
// the sample's call as a MultiFn, and its label in reports.
std::vector<Tensor> sample_leaves(const OpInfo& op, size_t sample_index);
MultiFn sample_function(const OpInfo& op, size_t sample_index);
std::string sample_label(const OpInfo& op, size_t sample_index);

// The whole matrix for one op; every check of every sample, in a stable order.
// options.fast_mode: the gradient rows (gradcheck, gradgradcheck, noncontiguous,
// broadcast) in PyTorch's fast mode; the tolerances stay the fixed ones.
std::vector<CheckResult> check_op(const OpInfo& op, GradcheckOptions options = {});

}  // namespace loom
