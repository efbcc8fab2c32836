// `import loom` loads this extension (loom/_loom*.so) and wraps it in Python.
#include "bindings.h"

#include "loom/error.h"

namespace loom::python {

std::shared_ptr<py::object> hold(py::object object) {
  return {new py::object(std::move(object)), [](py::object* held) {
            if (!Py_IsInitialized()) return;  // the interpreter is gone: nothing left to release
            py::gil_scoped_acquire acquire;
            delete held;
          }};
}

}  // namespace loom::python

PYBIND11_MODULE(_loom, m) {
  using namespace loom::python;
  m.doc() = "loom: reverse-mode automatic differentiation (the C++ engine, bound with pybind11)";
  // loom::Error is loom.Error, a RuntimeError carrying the engine's message.
  py::register_exception<loom::Error>(m, "Error", PyExc_RuntimeError);
  bind_tensor(m);
  bind_interop(m);
  bind_ops(m);
  bind_autograd(m);
  bind_study(m);
  bind_models(m);
}
