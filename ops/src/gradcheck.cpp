// Gradient checks in float64 and the per-op test matrix built from the registry.
#include "loom/gradcheck.h"

#include <algorithm>
#include <cmath>
#include <functional>

#include "loom/backend.h"
#include "loom/kernel_table.h"
#include "loom/ops.h"
#include "loom/philox.h"

namespace loom {

namespace {

bool is_differentiable_input(const Tensor& t) { return t.defined() && t.requires_grad(); }

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

void compare(CheckResult& result, double analytic, double numeric, const GradcheckTolerance& tol, const std::string& where) {
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

JacobianCheck jacobian_check(const MultiFn& fn, const std::vector<Tensor>& inputs, GradcheckTolerance tol) {
  JacobianCheck check;
  CheckResult& result = check.result;
  result.check = "gradcheck";
  std::vector<Tensor> diff;
  for (const Tensor& t : inputs)
    if (is_differentiable_input(t)) {
      LOOM_CHECK(t.dtype() == DType::f64, "gradcheck: differentiable inputs must be float64, got {}",
                 dtype_name(t.dtype()));
      diff.push_back(t);
    }
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
        compare(result, analytic[row][column], numeric, tol,
                fmt::format("d output[{}] / d input{}[{}]", row, j, e));
      }
    }
  }
  return check;
}

CheckResult gradcheck(const MultiFn& fn, const std::vector<Tensor>& inputs, GradcheckTolerance tol) {
  return jacobian_check(fn, inputs, tol).result;
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

JacobianCheck gradgrad_jacobian_check(const MultiFn& fn, const std::vector<Tensor>& inputs, GradcheckTolerance tol) {
  BackwardProblem problem = backward_problem(fn, inputs);
  JacobianCheck check = jacobian_check(problem.fn, problem.inputs, tol);
  check.result.check = "gradgradcheck";
  if (problem.cotangents == 0) check.result.message = "no differentiable output";
  return check;
}

CheckResult gradgradcheck(const MultiFn& fn, const std::vector<Tensor>& inputs, GradcheckTolerance tol) {
  return gradgrad_jacobian_check(fn, inputs, tol).result;
}

// ---- the test matrix ----
namespace {

uint64_t name_seed(const std::string& name, size_t index) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (char c : name) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  return h ^ (index * 0x9e3779b97f4a7c15ull);
}

// Values for one input spec, drawn from Philox: the same on every machine.
Tensor draw(const InputSpec& spec, Generator& gen) {
  if (!is_floating(spec.dtype)) {
    // Integers from [0, high); bools the same way with high = 2 (0 -> false, 1 -> true).
    LOOM_CHECK(spec.high > 0, "make_inputs: integer input needs a positive `high`");
    LOOM_CHECK(spec.dtype != DType::b8 || spec.high == 2, "make_inputs: a bool input needs high = 2, got {}",
               spec.high);
    Tensor u = rand(spec.shape, {DType::f64}, gen, 0.0, static_cast<double>(spec.high));
    Tensor ids = Tensor::empty(spec.shape, {spec.dtype});
    auto values = u.to_vector<double>();
    dispatch_all(spec.dtype, "make_inputs", [&](auto tag) {
      using T = typename decltype(tag)::type;
      T* p = ids.data<T>();
      for (size_t i = 0; i < values.size(); ++i) p[i] = static_cast<T>(static_cast<int64_t>(values[i]));
    });
    return ids;
  }
  Tensor t;
  switch (spec.domain) {
    case Domain::any: t = rand(spec.shape, {DType::f64}, gen, -2.0, 2.0); break;
    case Domain::positive: t = rand(spec.shape, {DType::f64}, gen, 0.5, 2.0); break;
    case Domain::unit: t = rand(spec.shape, {DType::f64}, gen, -0.9, 0.9); break;
    case Domain::away_from_zero: {
      auto magnitude = rand(spec.shape, {DType::f64}, gen, 0.25, 2.0).to_vector<double>();
      auto sign = rand(spec.shape, {DType::f64}, gen, -1.0, 1.0).to_vector<double>();
      for (size_t i = 0; i < magnitude.size(); ++i) magnitude[i] *= sign[i] < 0 ? -1.0 : 1.0;
      t = from_vector(magnitude, spec.shape, {DType::f64});
      break;
    }
  }
  return spec.dtype == DType::f64 ? t : to_dtype(t, spec.dtype);
}

// The same values laid out non-contiguously: transposed storage for 2+ dims,
// every other element of a larger buffer otherwise.
Tensor non_contiguous_copy(const Tensor& t) {
  NoGradGuard no_grad;
  Tensor view;
  if (t.dim() >= 2) {
    Shape reversed(t.shape().rbegin(), t.shape().rend());
    Tensor base = Tensor::empty(reversed, {t.dtype()});
    Shape dims(t.dim());
    for (int64_t d = 0; d < t.dim(); ++d) dims[d] = t.dim() - 1 - d;
    view = Tensor::make_view(base, t.shape(), permute(base, dims).strides(), 0);
  } else {
    Tensor base = Tensor::empty({std::max<int64_t>(1, t.numel()) * 2}, {t.dtype()});
    Shape strides(t.dim(), 2);
    view = Tensor::make_view(base, t.shape(), strides, 1);
  }
  copy_(view, t);
  return view;
}

std::string sample_label(const Sample& sample) {
  if (!sample.label.empty()) return sample.label;
  std::string label;
  for (const auto& in : sample.inputs) label += (label.empty() ? "" : ", ") + fmt::format("{}", in.shape);
  return label;
}

// Leaves: fresh tensors; those drawn as differentiable floats require grad.
std::vector<Tensor> as_leaves(const std::vector<Tensor>& values, const Sample& sample, bool differentiable) {
  std::vector<Tensor> leaves;
  for (size_t i = 0; i < values.size(); ++i) {
    Tensor leaf = values[i].detach();
    if (differentiable && is_floating(leaf.dtype()) && sample.inputs[i].differentiable) leaf.requires_grad_();
    leaves.push_back(leaf);
  }
  return leaves;
}

// Gradients of sum(out * v) for a fixed v: compares two implementations' backward.
std::vector<Tensor> vjp(const Tensor& out, const std::vector<Tensor>& leaves) {
  std::vector<Tensor> wrt;
  for (const Tensor& l : leaves)
    if (l.requires_grad()) wrt.push_back(l);
  if (wrt.empty() || !out.requires_grad()) return {};
  Generator gen(7);
  Tensor v = rand(out.shape(), {out.dtype(), out.device()}, gen, -1.0, 1.0);
  return grad({out}, wrt, {v}, false, false, true);
}

// An op's output followed by its vector-Jacobian products: what two
// implementations of the same op must agree on.
std::vector<Tensor> value_and_vjp(const OpCall& call, const std::vector<Tensor>& leaves) {
  Tensor out = call(leaves);
  std::vector<Tensor> result = {out};
  for (const Tensor& g : vjp(out, leaves)) result.push_back(g);
  return result;
}

// The same, on the plain reference kernels.
std::vector<Tensor> value_and_vjp_reference(const OpCall& call, const std::vector<Tensor>& leaves) {
  KernelModeGuard reference(KernelMode::reference);
  return value_and_vjp(call, leaves);
}

// The devices besides the CPU that have a backend and a device now (a build
// with CUDA on a machine without a GPU has the backend but no device).
std::vector<Device> other_devices() {
  std::vector<Device> devices;
  for (DeviceType type : {DeviceType::cuda, DeviceType::standin})
    if (has_backend(type) && backend(type).device_count() > 0) devices.push_back(Device{type, 0});
  return devices;
}

CheckResult compare_outputs(const std::string& check, const std::vector<Tensor>& expected,
                            const std::vector<Tensor>& actual, double tol) {
  CheckResult r;
  r.check = check;
  if (expected.size() != actual.size()) {
    r.passed = false;
    r.message = fmt::format("{} tensors vs {}", expected.size(), actual.size());
    return r;
  }
  for (size_t i = 0; i < expected.size(); ++i) {
    if (expected[i].defined() != actual[i].defined() ||
        (expected[i].defined() && expected[i].shape() != actual[i].shape())) {
      r.passed = false;
      r.message = fmt::format("tensor {}: shape {} vs {}", i, expected[i].defined() ? expected[i].shape() : Shape{},
                              actual[i].defined() ? actual[i].shape() : Shape{});
      return r;
    }
    if (!expected[i].defined()) continue;
    auto e = expected[i].to_vector<double>(), a = actual[i].to_vector<double>();
    for (size_t k = 0; k < e.size(); ++k) {
      double err = std::abs(e[k] - a[k]);
      bool both_nan = std::isnan(e[k]) && std::isnan(a[k]);
      r.max_abs_error = std::max(r.max_abs_error, both_nan ? 0.0 : err);
      if (!both_nan && !(err <= tol * (1 + std::abs(e[k]))) && r.passed) {
        r.passed = false;
        r.message = fmt::format("tensor {} element {}: {:.17g} vs {:.17g}", i, k, e[k], a[k]);
      }
    }
  }
  return r;
}

}  // namespace

std::vector<Tensor> make_inputs(const OpInfo& op, const Sample& sample, size_t sample_index) {
  Generator gen(name_seed(op.name, sample_index));
  std::vector<Tensor> values;
  for (const auto& spec : sample.inputs) values.push_back(draw(spec, gen));
  return values;
}

std::vector<Tensor> sample_leaves(const OpInfo& op, size_t sample_index) {
  LOOM_CHECK(sample_index < op.samples.size(), "{}: no sample {} (it has {})", op.name, sample_index,
             op.samples.size());
  const Sample& sample = op.samples[sample_index];
  return as_leaves(make_inputs(op, sample, sample_index), sample, op.differentiable);
}

MultiFn sample_function(const OpInfo& op, size_t sample_index) {
  const Sample& sample = op.samples.at(sample_index);
  const OpCall call = sample.call ? sample.call : op.call;
  return [call](const std::vector<Tensor>& args) { return std::vector<Tensor>{call(args)}; };
}

std::string sample_label(const OpInfo& op, size_t sample_index) { return sample_label(op.samples.at(sample_index)); }

std::vector<CheckResult> check_op(const OpInfo& op) {
  std::vector<CheckResult> results;
  // Agreement between two implementations of the same float64 math (different
  // summation orders) is far tighter than finite differences.
  constexpr double kSameMathTolerance = 1e-10;
  // float32 kernels may round differently (vector exp, summation order): a few ulp.
  constexpr double kFloat32Tolerance = 1e-5;
  for (size_t s = 0; s < op.samples.size(); ++s) {
    const Sample& sample = op.samples[s];
    const OpCall call = sample.call ? sample.call : op.call;
    const OpCall composed = sample.composed ? sample.composed : (sample.call ? OpCall() : op.composed);
    MultiFn fn = sample_function(op, s);
    std::string label = sample_label(sample);
    auto add = [&](CheckResult r) {
      r.op = op.name;
      r.sample = label;
      results.push_back(std::move(r));
    };
    auto guarded = [&](const std::string& check, const std::function<CheckResult()>& body) {
      try {
        add(body());
      } catch (const std::exception& e) {
        CheckResult r;
        r.check = check;
        r.passed = false;
        r.message = std::string("threw: ") + e.what();
        add(r);
      }
    };

    std::vector<Tensor> values = make_inputs(op, sample, s);
    std::vector<Tensor> leaves = sample_leaves(op, s);

    if (op.differentiable) {
      guarded("gradcheck", [&] { return gradcheck(fn, leaves); });
      if (op.gradgrad) guarded("gradgradcheck", [&] { return gradgradcheck(fn, leaves); });
    }

    // Fast kernels against the plain reference kernels: values and gradients.
    guarded("reference", [&] {
      return compare_outputs("reference", value_and_vjp(call, leaves), value_and_vjp_reference(call, leaves),
                             kSameMathTolerance);
    });

    // The same in float32, where fast kernels take their vector paths (e.g. the
    // polynomial exp) that float64 never reaches.
    bool has_float = std::any_of(values.begin(), values.end(), [](const Tensor& v) { return is_floating(v.dtype()); });
    if (has_float) {
      guarded("reference32", [&] {
        std::vector<Tensor> singles;
        for (const Tensor& v : values) singles.push_back(is_floating(v.dtype()) ? to_dtype(v, DType::f32) : v);
        std::vector<Tensor> leaves32 = as_leaves(singles, sample, op.differentiable);
        return compare_outputs("reference32", value_and_vjp(call, leaves32), value_and_vjp_reference(call, leaves32),
                               kFloat32Tolerance);
      });
    }

    // Every other device with a backend (a GPU, the stand-in device): values and
    // gradients of the same inputs, moved there, against the CPU's.
    for (Device device : other_devices()) {
      guarded("device", [&] {
        std::vector<Tensor> moved;
        for (const Tensor& v : values) moved.push_back(v.to(device));
        std::vector<Tensor> there = value_and_vjp(call, as_leaves(moved, sample, op.differentiable));
        for (Tensor& t : there) {
          if (!t.defined()) continue;
          LOOM_CHECK(t.device() == device, "{}: a result came back on {}, not {}", op.name, t.device(), device);
          t = t.to(kCPU);
        }
        CheckResult r = compare_outputs("device", value_and_vjp(call, leaves), there, kSameMathTolerance);
        if (!r.passed) r.message = fmt::format("on {}: {}", device, r.message);
        return r;
      });
    }

    if (composed) {
      guarded("composed", [&] {
        return compare_outputs("composed", value_and_vjp(composed, leaves), value_and_vjp(call, leaves),
                               kSameMathTolerance);
      });
    }

    if (!op.variants) continue;

    // Non-contiguous inputs: same values, same results, and gradcheck through them.
    guarded("noncontiguous", [&] {
      std::vector<Tensor> strided;
      for (const Tensor& v : values) strided.push_back(non_contiguous_copy(v));
      std::vector<Tensor> strided_leaves = as_leaves(strided, sample, op.differentiable);
      CheckResult r = compare_outputs("noncontiguous", {call(leaves).detach()}, {call(strided_leaves).detach()},
                                      kSameMathTolerance);
      if (r.passed && op.differentiable) {
        CheckResult g = gradcheck(fn, strided_leaves);
        g.check = "noncontiguous";
        return g;
      }
      return r;
    });

    // Broadcast inputs: each differentiable input of >= 1 dim given as a size-1
    // leading dim expanded to the full shape (gradients must sum back over it).
    bool any_broadcast = false;
    std::vector<Tensor> small = values;
    for (size_t i = 0; i < values.size(); ++i) {
      if (!is_floating(values[i].dtype()) || values[i].dim() == 0 || values[i].shape()[0] <= 1) continue;
      if (!sample.inputs[i].differentiable) continue;
      small[i] = contiguous(narrow(values[i], 0, 0, 1));
      any_broadcast = true;
    }
    if (any_broadcast && op.differentiable) {
      guarded("broadcast", [&] {
        std::vector<Tensor> small_leaves = as_leaves(small, sample, true);
        std::vector<Shape> full_shapes;
        for (const Tensor& v : values) full_shapes.push_back(v.shape());
        MultiFn expanded_fn = [call, full_shapes](const std::vector<Tensor>& args) {
          std::vector<Tensor> full;
          for (size_t i = 0; i < args.size(); ++i)
            full.push_back(args[i].shape() == full_shapes[i] ? args[i] : expand(args[i], full_shapes[i]));
          return std::vector<Tensor>{call(full)};
        };
        CheckResult r = gradcheck(expanded_fn, small_leaves);
        r.check = "broadcast";
        return r;
      });
    }
  }
  return results;
}

}  // namespace loom
