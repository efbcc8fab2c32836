// `import loom` loads this extension (loom/_loom*.so) and wraps it in Python.
#include "bindings.h"

#include <signal.h>

#include "loom/error.h"
#include "loom/interrupt.h"

namespace loom::python {

std::shared_ptr<py::object> hold(py::object object) {
  return {new py::object(std::move(object)), [](py::object* held) {
            if (!Py_IsInitialized()) return;  // the interpreter is gone: nothing left to release
            py::gil_scoped_acquire acquire;
            delete held;
          }};
}

namespace {

// Ctrl-C during a call that released the GIL: Python's handler only marks the signal,
// to be seen when the call returns; ours also asks loom to stop at its next kernel.
struct sigaction python_sigint;

void on_sigint(int signal) {
  request_interrupt();
  python_sigint.sa_handler(signal);
}

void chain_sigint() {
  if (sigaction(SIGINT, nullptr, &python_sigint) != 0) return;
  // Only where Python handles SIGINT itself (a C function, no siginfo): else its
  // action (default, ignored, another program's) stays as it was.
  if ((python_sigint.sa_flags & SA_SIGINFO) || python_sigint.sa_handler == SIG_DFL ||
      python_sigint.sa_handler == SIG_IGN)
    return;
  struct sigaction ours = python_sigint;
  ours.sa_handler = on_sigint;
  sigaction(SIGINT, &ours, nullptr);
}

}  // namespace

}  // namespace loom::python

PYBIND11_MODULE(_loom, m) {
  using namespace loom::python;
  m.doc() = "loom: reverse-mode automatic differentiation (the C++ engine, bound with pybind11)";
  // loom::Error is loom.Error, a RuntimeError carrying the engine's message.
  py::register_exception<loom::Error>(m, "Error", PyExc_RuntimeError);
  // loom::Interrupted (tried first: it is a loom::Error too) is KeyboardInterrupt, raised
  // by Python's own handler where it can run (the main thread), which also consumes the
  // pending signal, so no second KeyboardInterrupt follows.
  py::register_exception_translator([](std::exception_ptr thrown) {
    try {
      if (thrown) std::rethrow_exception(thrown);
    } catch (const loom::Interrupted& e) {
      if (PyErr_CheckSignals() == 0) PyErr_SetString(PyExc_KeyboardInterrupt, e.what());
    }
  });
  chain_sigint();
  bind_tensor(m);
  bind_interop(m);
  bind_ops(m);
  bind_signatures(m);
  bind_autograd(m);
  bind_study(m);
  bind_models(m);
  bind_data(m);
}
