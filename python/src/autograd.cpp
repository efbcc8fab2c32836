// Grad modes, loom.grad, and ops written in Python (loom.Function): the forward
// runs in Python, and its backward is a node of loom's graph like any C++ op's.
#include <pybind11/functional.h>
#include <pybind11/stl.h>

#include "bindings.h"
#include "loom/autograd.h"

namespace loom::python {

namespace {

// The gradients a Python backward returned, one per input: a Tensor or None.
std::vector<Tensor> gradients_from(const py::object& result, size_t inputs, const std::string& name) {
  py::tuple items = py::isinstance<py::tuple>(result) || py::isinstance<py::list>(result) ? py::tuple(result)
                                                                                          : py::make_tuple(result);
  if (items.size() != inputs)
    throw py::value_error(name + ".backward returned " + std::to_string(items.size()) + " gradients for " +
                          std::to_string(inputs) + " inputs");
  std::vector<Tensor> grads;
  for (size_t i = 0; i < items.size(); ++i) {
    if (items[i].is_none())
      grads.emplace_back();
    else if (py::isinstance<Tensor>(items[i]))
      grads.push_back(items[i].cast<Tensor>());
    else
      throw py::type_error(name + ".backward: gradient " + std::to_string(i) + " must be a loom.Tensor or None, got " +
                           type_name(items[i]));
  }
  return grads;
}

// Records `output = name(inputs)` with `backward(grad)` (a Python callable) as its derivative.
Tensor record_python_op(const std::string& name, const std::vector<Tensor>& inputs, const Tensor& output,
                        py::function backward) {
  // Detached: the forward may return an input or a view of one, which must not become the node's output.
  Tensor out = output.detach();
  const size_t count = inputs.size();
  return record(name, inputs, out, [held = hold(std::move(backward)), name, count](BackwardContext&, const Tensor& g) {
    py::gil_scoped_acquire acquire;
    return gradients_from((*held)(g), count, name);
  });
}

}  // namespace

void bind_autograd(py::module_& m) {
  m.def("is_grad_enabled", &grad_enabled);
  m.def("set_grad_enabled", &set_grad_enabled, py::arg("mode"));
  // Anomaly errors name the user's Python line: loom._user_line() walks the stack
  // past loom's own files (asked for in anomaly mode only; the op may have released the GIL).
  set_frontend_line([]() -> std::string {
    if (!Py_IsInitialized()) return {};
    py::gil_scoped_acquire acquire;
    try {
      return py::module_::import("loom").attr("_user_line")().cast<std::string>();
    } catch (const py::error_already_set&) {
      return {};
    }
  });
  m.def("is_anomaly_enabled", &anomaly_enabled);
  m.def("set_anomaly_enabled", &set_anomaly_enabled, py::arg("mode"));
  m.def(
      "grad",
      [](const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs, const py::object& grad_outputs,
         bool retain_graph, bool create_graph, bool allow_unused) {
        std::vector<Tensor> seeds;
        if (!grad_outputs.is_none())
          for (const auto& g : grad_outputs) seeds.push_back(g.is_none() ? Tensor() : g.cast<Tensor>());
        std::vector<Tensor> result;
        {
          ReleasedCall during;  // the GIL released, Ctrl-C stops it
          result = grad(outputs, inputs, seeds, {retain_graph || create_graph, create_graph, allow_unused});
        }
        py::list out;
        for (const auto& t : result) out.append(t.defined() ? py::cast(t) : py::none());
        return py::tuple(out);
      },
      py::arg("outputs"), py::arg("inputs"), py::arg("grad_outputs") = py::none(), py::arg("retain_graph") = false,
      py::arg("create_graph") = false, py::arg("allow_unused") = false,
      "d(outputs)/d(inputs) as a tuple, without touching .grad (torch.autograd.grad)");
  m.def("_record_python_op", &record_python_op, py::arg("name"), py::arg("inputs"), py::arg("output"),
        py::arg("backward"));
}

}  // namespace loom::python
