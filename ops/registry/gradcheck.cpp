// Gradient checks in float64: Jacobians from backward() against central differences.
#include "loom/gradcheck.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>

#include "loom/backend.h"
#include "loom/kernel_table.h"
#include "loom/ops.h"
#include "loom/philox.h"
#include "loom/random.h"

namespace loom {

namespace {

bool is_differentiable_input(const Tensor& t) { return t.defined() && t.requires_grad(); }

// The inputs that require grad, which must be float64.
std::vector<Tensor> differentiable_inputs(const std::vector<Tensor>& inputs) {
  std::vector<Tensor> diff;
  for (const Tensor& t : inputs)
    if (is_differentiable_input(t)) {
      LOOM_CHECK(t.dtype() == DType::f64, "gradcheck: differentiable inputs must be float64, got {}",
                 dtype_name(t.dtype()));
      diff.push_back(t);
    }
  return diff;
}

// A tensor's values on the host, from any device.
std::vector<double> host_values(const Tensor& t) { return t.to(kCPU).to_vector<double>(); }

// The values of several outputs, concatenated in logical order.
std::vector<double> flat_values(const std::vector<Tensor>& outputs) {
  std::vector<double> values;
  for (const Tensor& o : outputs) {
    if (!o.defined()) continue;
    auto v = host_values(o);
    values.insert(values.end(), v.begin(), v.end());
  }
  return values;
}

std::vector<Tensor> evaluate(const MultiFn& fn, const std::vector<Tensor>& inputs) {
  std::vector<Tensor> out = fn(inputs);
  return out;
}

void compare(CheckResult& result, double analytic, double numeric, const GradcheckOptions& tol,
             const std::string& where) {
  double abs_err = std::abs(analytic - numeric);
  double rel_err = abs_err / std::max(std::abs(numeric), 1e-12);
  result.max_abs_error = std::max(result.max_abs_error, abs_err);
  if (std::abs(numeric) > tol.atol) result.max_rel_error = std::max(result.max_rel_error, rel_err);
  if (!(abs_err <= tol.atol + tol.rtol * std::abs(numeric)) && result.passed) {
    result.passed = false;
    result.message = fmt::format("{}: analytic {:.8g} vs numeric {:.8g}", where, analytic, numeric);
  }
}

// Element i (logical order) of t as a 0-d view of its storage, on t's device.
Tensor element_view(const Tensor& t, int64_t i) {
  return Tensor::make_view(t, {}, {}, t.offset() + strided_offset(i, t.shape(), t.strides()));
}

}  // namespace

JacobianCheck jacobian_check(const MultiFn& fn, const std::vector<Tensor>& inputs, GradcheckOptions tol) {
  JacobianCheck check;
  CheckResult& result = check.result;
  result.check = "gradcheck";
  const std::vector<Tensor> diff = differentiable_inputs(inputs);
  for (size_t i = 0; i < inputs.size(); ++i)
    if (is_differentiable_input(inputs[i])) check.columns.push_back({i, inputs[i].numel()});
  std::vector<Tensor> outputs = evaluate(fn, inputs);

  // Analytic Jacobian, one row per output element: backward with a one-hot seed.
  std::vector<std::vector<double>>& analytic = check.analytic;
  for (const Tensor& out : outputs) {
    for (int64_t i = 0; i < out.numel(); ++i) {
      std::vector<double> row;
      if (out.requires_grad() && !diff.empty()) {
        Tensor seed = zeros(out.shape(), {out.dtype(), out.device()});
        device_fill(element_view(seed, i), 1.0);
        auto grads = grad({out}, diff, {seed}, /*retain_graph=*/true, /*create_graph=*/false, /*allow_unused=*/true);
        for (size_t j = 0; j < diff.size(); ++j) {
          if (grads[j].defined()) {
            auto g = host_values(grads[j]);
            row.insert(row.end(), g.begin(), g.end());
          } else {
            row.insert(row.end(), diff[j].numel(), 0.0);
          }
        }
      } else {
        for (const Tensor& d : diff) row.insert(row.end(), d.numel(), 0.0);
      }
      analytic.push_back(std::move(row));
    }
  }

  // Numeric Jacobian: perturb each input element in place by +-eps, through
  // its device's fill (the inputs may live on any device).
  check.numeric.assign(analytic.size(), std::vector<double>(analytic.empty() ? 0 : analytic[0].size()));
  size_t column = 0;
  for (size_t j = 0; j < diff.size(); ++j) {
    const std::vector<double> originals = host_values(diff[j]);
    for (int64_t e = 0; e < diff[j].numel(); ++e, ++column) {
      const double original = originals[e];
      const Tensor element = element_view(diff[j], e);
      std::vector<double> plus, minus;
      // Grad mode stays on: fn may itself run a backward pass (gradgradcheck).
      device_fill(element, original + tol.eps);
      plus = flat_values(evaluate(fn, inputs));
      device_fill(element, original - tol.eps);
      minus = flat_values(evaluate(fn, inputs));
      device_fill(element, original);
      for (size_t row = 0; row < analytic.size(); ++row) {
        double numeric = (plus[row] - minus[row]) / (2 * tol.eps);
        check.numeric[row][column] = numeric;
        compare(result, analytic[row][column], numeric, tol, fmt::format("d output[{}] / d input{}[{}]", row, j, e));
      }
    }
  }
  return check;
}

namespace {

// Writes values (logical order) into t outside autograd; t may be strided, on any device.
void assign(const Tensor& t, const std::vector<double>& values) {
  NoGradGuard no_grad;
  copy_(t, from_vector(values, t.shape(), {DType::f64}).to(t.device()));
}

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  return std::inner_product(a.begin(), a.end(), b.begin(), 0.0);
}

// Fast mode (GradcheckOptions::fast_mode): per differentiable input j, (J_j^T v) . u_j
// from one backward pass against v . (f(x + eps u_j) - f(x - eps u_j)) / 2 eps.
CheckResult projected_check(const MultiFn& fn, const std::vector<Tensor>& inputs, GradcheckOptions tol) {
  CheckResult result;
  result.check = "gradcheck";
  const std::vector<Tensor> diff = differentiable_inputs(inputs);
  // v and u uniform in [0, 1) as PyTorch draws them (u then scaled to unit length):
  // positive weights, so the summed tolerance cannot cancel.
  Generator gen(0x5eed);
  const std::vector<Tensor> outputs = evaluate(fn, inputs);
  std::vector<Tensor> roots, seeds;
  std::vector<double> v;  // every output's weights, concatenated as flat_values concatenates the outputs
  for (const Tensor& out : outputs) {
    if (!out.defined()) continue;
    Tensor weights = rand(out.shape(), {DType::f64}, gen);
    auto w = weights.to_vector<double>();
    v.insert(v.end(), w.begin(), w.end());
    if (!out.requires_grad()) continue;
    roots.push_back(out);
    seeds.push_back(to_dtype(weights, out.dtype()).to(out.device()));
  }
  std::vector<Tensor> vjp(diff.size());
  if (!roots.empty() && !diff.empty())
    vjp = grad(roots, diff, seeds, /*retain_graph=*/false, /*create_graph=*/false, /*allow_unused=*/true);
  const double sum_v = std::accumulate(v.begin(), v.end(), 0.0);
  for (size_t j = 0; j < diff.size(); ++j) {
    std::vector<double> u = rand(diff[j].shape(), {DType::f64}, gen).to_vector<double>();
    const double norm = std::sqrt(dot(u, u));
    double sum_u = 0;
    for (double& e : u) sum_u += (e /= norm);
    const double analytic = vjp[j].defined() ? dot(host_values(vjp[j]), u) : 0.0;
    const std::vector<double> originals = host_values(diff[j]);
    auto moved = [&](double step) {
      std::vector<double> x = originals;
      for (size_t e = 0; e < x.size(); ++e) x[e] += step * u[e];
      return x;
    };
    assign(diff[j], moved(tol.eps));
    const std::vector<double> plus = flat_values(evaluate(fn, inputs));
    assign(diff[j], moved(-tol.eps));
    const std::vector<double> minus = flat_values(evaluate(fn, inputs));
    assign(diff[j], originals);
    double numeric = 0;
    for (size_t row = 0; row < v.size(); ++row) numeric += v[row] * (plus[row] - minus[row]) / (2 * tol.eps);
    GradcheckOptions summed = tol;
    summed.atol = tol.atol * sum_u * sum_v;
    compare(result, analytic, numeric, summed, fmt::format("v . d output / d input{} . u", j));
  }
  return result;
}

}  // namespace

CheckResult gradcheck(const MultiFn& fn, const std::vector<Tensor>& inputs, GradcheckOptions tol) {
  return tol.fast_mode ? projected_check(fn, inputs, tol) : jacobian_check(fn, inputs, tol).result;
}

BackwardProblem backward_problem(const MultiFn& fn, const std::vector<Tensor>& inputs) {
  std::vector<Tensor> outputs = fn(inputs);
  // Random output cotangents v, themselves differentiated.
  BackwardProblem problem;
  problem.inputs = inputs;
  Generator gen(0x9e3779b97f4a7c15ull);
  for (const Tensor& out : outputs) {
    if (!out.requires_grad()) continue;
    Tensor v = rand(out.shape(), {DType::f64, out.device()}, gen, -1.0, 1.0);
    v.requires_grad_();
    problem.inputs.push_back(v);
    ++problem.cotangents;
  }
  size_t n_inputs = inputs.size();
  problem.fn = [fn, n_inputs](const std::vector<Tensor>& args) {
    std::vector<Tensor> in(args.begin(), args.begin() + n_inputs);
    std::vector<Tensor> outs = fn(in);
    std::vector<Tensor> roots, seeds, wrt;
    size_t next_v = n_inputs;
    for (const Tensor& out : outs)
      if (out.requires_grad()) {
        roots.push_back(out);
        seeds.push_back(args[next_v++]);
      }
    for (const Tensor& t : in)
      if (is_differentiable_input(t)) wrt.push_back(t);
    std::vector<Tensor> grads;
    if (!roots.empty()) grads = grad(roots, wrt, seeds, true, /*create_graph=*/true, /*allow_unused=*/true);
    for (size_t i = 0; i < grads.size(); ++i)
      if (!grads[i].defined()) grads[i] = zeros_like(wrt[i]);
    return grads;
  };
  return problem;
}

JacobianCheck gradgrad_jacobian_check(const MultiFn& fn, const std::vector<Tensor>& inputs, GradcheckOptions tol) {
  BackwardProblem problem = backward_problem(fn, inputs);
  JacobianCheck check = jacobian_check(problem.fn, problem.inputs, tol);
  check.result.check = "gradgradcheck";
  if (problem.cotangents == 0) check.result.message = "no differentiable output";
  return check;
}

CheckResult gradgradcheck(const MultiFn& fn, const std::vector<Tensor>& inputs, GradcheckOptions tol) {
  if (!tol.fast_mode) return gradgrad_jacobian_check(fn, inputs, tol).result;
  BackwardProblem problem = backward_problem(fn, inputs);
  CheckResult result = projected_check(problem.fn, problem.inputs, tol);
  result.check = "gradgradcheck";
  if (problem.cotangents == 0) result.message = "no differentiable output";
  return result;
}

}  // namespace loom
