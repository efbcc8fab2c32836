// What a learner looks at: gradcheck of any Python function (the registry's own
// checker), an op explained with both Jacobians as arrays, and the autograd
// graph drawn by Graphviz with the gradient norms that flowed along it.
#include <pybind11/functional.h>
#include <pybind11/numpy.h>
#include <pybind11/stl.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "../../tools/graph_render.h"
#include "bindings.h"
#include "loom/autograd.h"
#include "loom/explain.h"
#include "loom/gradcheck.h"
#include "loom/registry.h"

namespace loom::python {

namespace {

py::object python_value(const ArgumentValue& value) {
  return std::visit(
      [](const auto& v) -> py::object {
        if constexpr (std::is_same_v<std::decay_t<decltype(v)>, std::monostate>)
          return py::none();
        else
          return py::cast(v);
      },
      value);
}

// A sample's attributes by name where it calls its op's invoke, else None.
py::object through_schema(const OpInfo& op, const Sample& sample) {
  if (!op.signature || sample.call) return py::none();
  py::dict attributes;
  for (const auto& [name, value] : sample.attributes) attributes[name.c_str()] = python_value(value);
  return attributes;
}

// A Python function of tensors as the checker's MultiFn: one Tensor or a sequence of them out.
MultiFn multi_fn(py::function fn) {
  return [held = hold(std::move(fn))](const std::vector<Tensor>& inputs) {
    py::gil_scoped_acquire acquire;
    py::tuple args(inputs.size());
    for (size_t i = 0; i < inputs.size(); ++i) args[i] = py::cast(inputs[i]);
    py::object out = (*held)(*args);
    if (py::isinstance<Tensor>(out)) return std::vector<Tensor>{out.cast<Tensor>()};
    return out.cast<std::vector<Tensor>>();
  };
}

using Checker = CheckResult (*)(const MultiFn&, const std::vector<Tensor>&, GradcheckOptions);

template <Checker check>
bool run_check(py::function fn, const py::object& inputs, double eps, double atol, double rtol, bool raise_exception,
               bool fast_mode) {
  std::vector<Tensor> args =
      py::isinstance<Tensor>(inputs) ? std::vector<Tensor>{inputs.cast<Tensor>()} : inputs.cast<std::vector<Tensor>>();
  CheckResult result;
  {
    MultiFn f = multi_fn(std::move(fn));
    ReleasedCall during;  // the GIL released, Ctrl-C stops it
    result = check(f, args, {eps, atol, rtol, fast_mode});
  }
  if (!result.passed && raise_exception)
    throw Error(fmt::format("{} failed: max abs error {:.3e}, max rel error {:.3e}: {}", result.check,
                            result.max_abs_error, result.max_rel_error, result.message));
  return result.passed;
}

py::array matrix(const std::vector<std::vector<double>>& rows) {
  const size_t n = rows.size(), m = rows.empty() ? 0 : rows[0].size();
  py::array_t<double> out({n, m});
  auto view = out.mutable_unchecked<2>();
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j < m; ++j) view(i, j) = rows[i][j];
  return out;
}

py::dict jacobians(const JacobianCheck& check) {
  py::dict d;
  d["analytic"] = matrix(check.analytic);
  d["numeric"] = matrix(check.numeric);
  d["max_abs_error"] = check.result.max_abs_error;
  d["passed"] = check.result.passed;
  return d;
}

py::dict explain_op(const std::string& name, const py::object& sample) {
  const OpInfo& op = op_or_error(name);
  const size_t index = sample.is_none() ? smallest_sample(op) : sample.cast<size_t>();
  LOOM_CHECK(index < op.samples.size(), "explain {}: sample {} of {}", name, index, op.samples.size());
  Explanation e = explain(op, index);
  py::dict d;
  d["name"] = op.name;
  d["formula"] = op.formula;
  d["derivative"] = op.derivative;
  d["shape_rule"] = op.shape_rule;
  d["sample"] = e.sample_label;
  d["inputs"] = e.inputs;
  d["output"] = e.output;
  d["gradcheck"] = e.first ? py::object(jacobians(*e.first)) : py::none();
  d["gradgradcheck"] = e.second ? py::object(jacobians(*e.second)) : py::none();
  d["text"] = format_explanation(e);
  return d;
}

// SVG text of a DOT graph, through Graphviz (render_dot writes files).
std::string svg_of(const std::string& dot) {
  namespace fs = std::filesystem;
  const fs::path path = fs::temp_directory_path() / ("loom_graph_" + std::to_string(::getpid()) + ".svg");
  tools::render_dot(dot, {{"svg", path.string()}});
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  fs::remove(path);
  return text.str();
}

// `with loom.trace_gradients() as trace:` collects gradient norms for graph pictures.
struct Trace {
  GradientTrace trace;
  std::unique_ptr<GradientTraceGuard> guard;
};

}  // namespace

void bind_study(py::module_& m) {
  m.def("gradcheck", &run_check<gradcheck>, py::arg("fn"), py::arg("inputs"), py::kw_only(), py::arg("eps") = 1e-6,
        py::arg("atol") = 1e-5, py::arg("rtol") = 1e-3, py::arg("raise_exception") = true, py::arg("fast_mode") = false,
        "backward's Jacobian of fn against central differences (float64 inputs that require grad); fast_mode: "
        "one random projection v.J.u per input, as torch.autograd.gradcheck(fast_mode=True)");
  m.def("gradgradcheck", &run_check<gradgradcheck>, py::arg("fn"), py::arg("inputs"), py::kw_only(),
        py::arg("eps") = 1e-6, py::arg("atol") = 1e-5, py::arg("rtol") = 1e-3, py::arg("raise_exception") = true,
        py::arg("fast_mode") = false, "gradcheck of fn's backward itself: the second derivative");
  m.def("_explain", &explain_op, py::arg("op"), py::arg("sample") = py::none());
  m.def(
      "_sample_inputs",
      [](const std::string& name) {
        const OpInfo& op = op_or_error(name);
        py::list samples;
        for (size_t i = 0; i < op.samples.size(); ++i)
          samples.append(py::make_tuple(op.samples[i].label, make_inputs(op, op.samples[i], i),
                                        through_schema(op, op.samples[i])));
        return samples;
      },
      py::arg("op"),
      "each sample's label, inputs (drawn as the test matrix draws them) and, where it calls the op "
      "through its schema, its attributes by name (else None): the conformance suite's cases");
  m.def(
      "_signature",
      [](const std::string& name) -> py::object {
        const OpInfo& op = op_or_error(name);
        if (!op.signature) return py::none();
        py::list parameters;
        for (const Parameter& p : op.signature->parameters)
          parameters.append(py::dict(py::arg("name") = p.name, py::arg("type") = std::string(type_name(p.type)),
                                     py::arg("optional") = p.optional, py::arg("keyword_only") = p.keyword_only,
                                     py::arg("has_default") = p.default_value.has_value()));
        return parameters;
      },
      py::arg("op"), "the op's schema as a list of parameters (name, type, ...), or None without one");
  m.def("op_names", [] {
    std::vector<std::string> names;
    for (const auto& op : registered_ops()) names.push_back(op.name);
    return names;
  });
  py::class_<Trace>(m, "GradientTrace")
      .def(py::init<>())
      .def("__enter__",
           [](Trace& t) -> Trace& {
             t.guard = std::make_unique<GradientTraceGuard>(t.trace);
             return t;
           })
      .def("__exit__", [](Trace& t, const py::args&) { t.guard.reset(); });
  m.def(
      "graph_dot",
      [](const Tensor& root, const Trace* trace) {
        return graph_dot(root, {.trace = trace ? &trace->trace : nullptr});
      },
      py::arg("root"), py::arg("trace") = nullptr);
  m.def("svg_of_dot", &svg_of, py::arg("dot"));
}

}  // namespace loom::python
