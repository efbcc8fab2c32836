// The per-op test matrix built from the registry: each registration's samples run
// through gradcheck, gradgradcheck (gradcheck.cpp), non-contiguous and broadcast
// variants, fused vs composed, fast vs reference kernels and every other device.
#include <algorithm>
#include <cmath>

#include "loom/backend.h"
#include "loom/gradcheck.h"
#include "loom/kernel_table.h"
#include "loom/byte_hash.h"
#include "loom/ops.h"
#include "loom/philox.h"

namespace loom {

namespace {

uint64_t name_seed(const std::string& name, size_t index) {
  ByteHash h;
  h.add(name);
  return h.value() ^ (index * 0x9e3779b97f4a7c15ull);
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
  // Drawn as bfloat16 values, so that a bfloat16 output and its float32 twin get the same v.
  Tensor v =
      to_dtype(to_dtype(rand(out.shape(), {DType::f32, out.device()}, gen, -1.0, 1.0), DType::bf16), out.dtype());
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
  const OpCall call = sample_call(op, sample);
  return [call](const std::vector<Tensor>& args) { return std::vector<Tensor>{call(args)}; };
}

std::string sample_label(const OpInfo& op, size_t sample_index) { return sample_label(op.samples.at(sample_index)); }

namespace {

// Agreement between two implementations of the same float64 math (different
// summation orders) is far tighter than finite differences.
constexpr double kSameMathTolerance = 1e-10;
// float32 kernels may round differently (vector exp, summation order): a few ulp.
constexpr double kFloat32Tolerance = 1e-5;
// A bfloat16 value is float32's rounded once (a relative error up to 2^-9): 2^-8
// allows for float32 kernels that round differently. A gradient passes through a
// few such roundings: 2^-6 allows about four.
constexpr double kBfloat16Tolerance = 1.0 / 256;
constexpr double kBfloat16GradTolerance = 1.0 / 64;

// The checks of one sample of an op, each adding its results (a check that throws
// is a failed result naming the exception).
class SampleChecks {
 public:
  SampleChecks(const OpInfo& op, size_t s, GradcheckOptions options, std::vector<CheckResult>& results)
      : op_(op),
        options_(options),
        sample_(op.samples[s]),
        call_(sample_call(op, sample_)),
        composed_(sample_.composed ? sample_.composed
                                   : (sample_.call || !sample_.attributes.empty() ? OpCall() : op.composed)),
        fn_(sample_function(op, s)),
        label_(sample_label(sample_)),
        values_(make_inputs(op, sample_, s)),
        leaves_(sample_leaves(op, s)),
        results_(results) {}

  void derivatives() {
    if (!op_.differentiable) return;
    guarded("gradcheck", [&] { return gradcheck(fn_, leaves_, options_); });
    if (op_.gradgrad) guarded("gradgradcheck", [&] { return gradgradcheck(fn_, leaves_, options_); });
  }

  // Fast kernels against the plain reference kernels: values and gradients; then the
  // same in float32, where fast kernels take their vector paths (e.g. the polynomial
  // exp) that float64 never reaches.
  void reference() {
    guarded("reference", [&] {
      return compare_outputs("reference", value_and_vjp(call_, leaves_), value_and_vjp_reference(call_, leaves_),
                             kSameMathTolerance);
    });
    if (std::none_of(values_.begin(), values_.end(), [](const Tensor& v) { return is_floating(v.dtype()); })) return;
    guarded("reference32", [&] {
      std::vector<Tensor> singles;
      for (const Tensor& v : values_) singles.push_back(is_floating(v.dtype()) ? to_dtype(v, DType::f32) : v);
      std::vector<Tensor> leaves32 = as_leaves(singles, sample_, op_.differentiable);
      return compare_outputs("reference32", value_and_vjp(call_, leaves32), value_and_vjp_reference(call_, leaves32),
                             kFloat32Tolerance);
    });
  }

  // Every other device with a backend (a GPU, the stand-in device): values and
  // gradients of the same inputs, moved there, against the CPU's.
  void devices() {
    for (Device device : other_devices()) {
      guarded("device", [&] {
        std::vector<Tensor> moved;
        for (const Tensor& v : values_) moved.push_back(v.to(device));
        std::vector<Tensor> there = value_and_vjp(call_, as_leaves(moved, sample_, op_.differentiable));
        for (Tensor& t : there) {
          if (!t.defined()) continue;
          LOOM_CHECK(t.device() == device, "{}: a result came back on {}, not {}", op_.name, t.device(), device);
          t = t.to(kCPU);
        }
        CheckResult r = compare_outputs("device", value_and_vjp(call_, leaves_), there, kSameMathTolerance);
        if (!r.passed) r.message = fmt::format("on {}: {}", device, r.message);
        return r;
      });
    }
  }

  // An op with a bfloat16 kernel: the sample's floating inputs rounded to bfloat16
  // (0-d ones, a loss's gradient, stay float32), its value (bfloat16, or a float32
  // scalar: a loss) and gradients (each its input's dtype) against float32's on the
  // same values; and on every other device against the CPU's, within a few bfloat16
  // steps (a GPU's float32 exp or tanh may round across a bfloat16 boundary).
  void bfloat16() {
    if (!supports(op_.name, kCPU, DType::bf16)) return;
    std::vector<Tensor> halves, singles;
    for (const Tensor& v : values_) {
      const bool lowered = is_floating(v.dtype()) && v.dim() > 0;
      halves.push_back(lowered ? to_dtype(v, DType::bf16) : is_floating(v.dtype()) ? to_dtype(v, DType::f32) : v);
      singles.push_back(is_floating(v.dtype()) ? to_dtype(halves.back(), DType::f32) : v);
    }
    const std::vector<Tensor> half_leaves = as_leaves(halves, sample_, op_.differentiable);
    guarded("bf16", [&] {
      std::vector<Tensor> lowered = value_and_vjp(call_, half_leaves);
      const Tensor& result = lowered[0];
      LOOM_CHECK(!is_floating(result.dtype()) || result.dtype() == DType::bf16 ||
                     (result.dim() == 0 && result.dtype() == DType::f32),
                 "{}: its value on bfloat16 inputs is {}", op_.name, dtype_name(result.dtype()));
      std::vector<Tensor> wrt;
      for (const Tensor& leaf : half_leaves)
        if (leaf.requires_grad()) wrt.push_back(leaf);
      for (size_t i = 1; i < lowered.size(); ++i)
        LOOM_CHECK(lowered[i].dtype() == wrt.at(i - 1).dtype(), "{}: gradient {} is {} for a {} input", op_.name, i - 1,
                   dtype_name(lowered[i].dtype()), dtype_name(wrt[i - 1].dtype()));
      const std::vector<Tensor> expected = value_and_vjp(call_, as_leaves(singles, sample_, op_.differentiable));
      const CheckResult value = compare_outputs("bf16", {expected[0]}, {lowered[0]}, kBfloat16Tolerance);
      if (!value.passed) return value;
      CheckResult r = compare_outputs("bf16", std::vector<Tensor>(expected.begin() + 1, expected.end()),
                                      std::vector<Tensor>(lowered.begin() + 1, lowered.end()), kBfloat16GradTolerance);
      if (!r.passed) r.message = "gradient " + r.message;
      r.max_abs_error = std::max(r.max_abs_error, value.max_abs_error);
      return r;
    });
    for (Device device : other_devices()) {
      guarded("bf16 device", [&] {
        std::vector<Tensor> moved;
        for (const Tensor& v : halves) moved.push_back(v.to(device));
        std::vector<Tensor> there = value_and_vjp(call_, as_leaves(moved, sample_, op_.differentiable));
        for (Tensor& t : there)
          if (t.defined()) t = t.to(kCPU);
        CheckResult r =
            compare_outputs("bf16 device", value_and_vjp(call_, half_leaves), there, kBfloat16GradTolerance);
        if (!r.passed) r.message = fmt::format("on {}: {}", device, r.message);
        return r;
      });
    }
  }

  // A fused op against the composition of ops it replaces.
  void composition() {
    if (!composed_) return;
    guarded("composed", [&] {
      return compare_outputs("composed", value_and_vjp(composed_, leaves_), value_and_vjp(call_, leaves_),
                             kSameMathTolerance);
    });
  }

  // Non-contiguous inputs: same values, same results, and gradcheck through them.
  void noncontiguous() {
    guarded("noncontiguous", [&] {
      std::vector<Tensor> strided;
      for (const Tensor& v : values_) strided.push_back(non_contiguous_copy(v));
      std::vector<Tensor> strided_leaves = as_leaves(strided, sample_, op_.differentiable);
      CheckResult r = compare_outputs("noncontiguous", {call_(leaves_).detach()}, {call_(strided_leaves).detach()},
                                      kSameMathTolerance);
      if (r.passed && op_.differentiable) {
        CheckResult g = gradcheck(fn_, strided_leaves, options_);
        g.check = "noncontiguous";
        return g;
      }
      return r;
    });
  }

  // Broadcast inputs: each differentiable input of >= 1 dim given as a size-1
  // leading dim expanded to the full shape (gradients must sum back over it).
  void broadcast() {
    bool any_broadcast = false;
    std::vector<Tensor> small = values_;
    for (size_t i = 0; i < values_.size(); ++i) {
      if (!is_floating(values_[i].dtype()) || values_[i].dim() == 0 || values_[i].shape()[0] <= 1) continue;
      if (!sample_.inputs[i].differentiable) continue;
      small[i] = contiguous(narrow(values_[i], 0, 0, 1));
      any_broadcast = true;
    }
    if (!any_broadcast || !op_.differentiable) return;
    guarded("broadcast", [&] {
      std::vector<Tensor> small_leaves = as_leaves(small, sample_, true);
      std::vector<Shape> full_shapes;
      for (const Tensor& v : values_) full_shapes.push_back(v.shape());
      MultiFn expanded_fn = [call = call_, full_shapes](const std::vector<Tensor>& args) {
        std::vector<Tensor> full;
        for (size_t i = 0; i < args.size(); ++i)
          full.push_back(args[i].shape() == full_shapes[i] ? args[i] : expand(args[i], full_shapes[i]));
        return std::vector<Tensor>{call(full)};
      };
      CheckResult r = gradcheck(expanded_fn, small_leaves, options_);
      r.check = "broadcast";
      return r;
    });
  }

 private:
  void guarded(const std::string& check, const std::function<CheckResult()>& body) {
    CheckResult r;
    try {
      r = body();
    } catch (const std::exception& e) {
      r = CheckResult{};
      r.check = check;
      r.passed = false;
      r.message = std::string("threw: ") + e.what();
    }
    r.op = op_.name;
    r.sample = label_;
    results_.push_back(std::move(r));
  }

  const OpInfo& op_;
  const GradcheckOptions options_;
  const Sample& sample_;
  const OpCall call_, composed_;
  const MultiFn fn_;
  const std::string label_;
  const std::vector<Tensor> values_, leaves_;
  std::vector<CheckResult>& results_;
};

}  // namespace

std::vector<CheckResult> check_op(const OpInfo& op, GradcheckOptions options) {
  std::vector<CheckResult> results;
  for (size_t s = 0; s < op.samples.size(); ++s) {
    SampleChecks checks(op, s, options, results);
    checks.derivatives();
    checks.reference();
    checks.devices();
    checks.bfloat16();
    checks.composition();
    if (!op.variants) continue;
    checks.noncontiguous();
    checks.broadcast();
  }
  return results;
}

}  // namespace loom
