// Grad modes, loom.grad, and ops written in Python (loom.Function): the forward
// runs in Python, and its backward is a node of loom's graph like any C++ op's.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <pybind11/functional.h>
#include <pybind11/stl.h>

#include "bindings.h"
#include "loom/autograd.h"
#include "loom/ops.h"

namespace loom::python {

namespace {

// Whether `from` broadcasts to `to` (as an input broadcast by its op's forward).
bool expands_to(const Shape& from, const Shape& to) {
  if (from.size() > to.size()) return false;
  for (size_t i = 1; i <= from.size(); ++i)
    if (from[from.size() - i] != 1 && from[from.size() - i] != to[to.size() - i]) return false;
  return true;
}

struct InputMeta {
  Shape shape;
  DType dtype;
};

// The gradients a Python backward returned, one per input: a Tensor or None. As
// PyTorch's engine: each in its input's dtype, and summed to its shape where it was
// broadcast; any other shape is an error naming the Function and the input.
std::vector<Tensor> gradients_from(const py::object& result, const std::vector<InputMeta>& inputs,
                                   const std::string& name) {
  py::tuple items = py::isinstance<py::tuple>(result) || py::isinstance<py::list>(result) ? py::tuple(result)
                                                                                          : py::make_tuple(result);
  if (items.size() != inputs.size())
    throw py::value_error(name + ".backward returned " + std::to_string(items.size()) + " gradients for " +
                          std::to_string(inputs.size()) + " inputs");
  std::vector<Tensor> grads;
  for (size_t i = 0; i < items.size(); ++i) {
    if (items[i].is_none()) {
      grads.emplace_back();
      continue;
    }
    if (!py::isinstance<Tensor>(items[i]))
      throw py::type_error(name + ".backward: gradient " + std::to_string(i) + " must be a loom.Tensor or None, got " +
                           type_name(items[i]));
    Tensor g = items[i].cast<Tensor>();
    if (!is_floating(g.dtype()))
      throw py::type_error(
          fmt::format("{}.backward: gradient {} is {}, not a floating dtype", name, i, dtype_name(g.dtype())));
    if (g.shape() != inputs[i].shape) {
      if (!expands_to(inputs[i].shape, g.shape()))
        throw py::value_error(fmt::format("{}.backward: gradient {} has shape {}, but input {} has shape {}", name, i,
                                          g.shape(), i, inputs[i].shape));
      g = sum_to(g, inputs[i].shape);
    }
    grads.push_back(to_dtype(g, inputs[i].dtype));
  }
  return grads;
}

// Records `output = name(inputs)` with `backward(grad)` (a Python callable) as its derivative.
Tensor record_python_op(const std::string& name, const std::vector<Tensor>& inputs, const Tensor& output,
                        py::function backward) {
  // Detached: the forward may return an input or a view of one, which must not become the node's output.
  Tensor out = output.detach();
  std::vector<InputMeta> metas;
  for (const Tensor& input : inputs) metas.push_back({input.shape(), input.dtype()});
  return record(name, inputs, out, [held = hold(std::move(backward)), name, metas](BackwardContext&, const Tensor& g) {
    py::gil_scoped_acquire acquire;
    return gradients_from((*held)(g), metas, name);
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
