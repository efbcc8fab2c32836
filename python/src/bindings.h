#pragma once
// The pieces of the `loom._loom` extension module, one file each, called in order
// by module.cpp. Python's loom package (python/loom/__init__.py) builds on them.
#include <pybind11/pybind11.h>

#include <memory>
#include <string>

#include "loom/interrupt.h"
#include "loom/tensor.h"

namespace loom::python {

namespace py = pybind11;

void bind_tensor(py::module_& m);      // tensor.cpp: the Tensor class, operators, methods, indexing
void bind_interop(py::module_& m);     // interop.cpp: NumPy, the buffer protocol, DLPack (zero-copy)
void bind_ops(py::module_& m);         // ops.cpp: every registered op, from the registry; ops with attributes
void bind_autograd(py::module_& m);    // autograd.cpp: grad modes, loom.grad, hooks, Python-defined ops
void bind_signatures(py::module_& m);  // signatures.cpp: loom.<op> and Tensor.<op> from the ops' schemas
void bind_study(py::module_& m);       // study.cpp: gradcheck, explain, the graph picture
void bind_models(py::module_& m);      // models.cpp: loom.nn, loom.optim, loom.models (a trained model folder)
void bind_data(py::module_& m);        // data.cpp: loom.data, corpus stores

// A Python object that C++ may hold and drop on any thread (a hook, a Python
// op's backward, an array whose memory a tensor borrows): dropping it takes the
// GIL, and after the interpreter has ended it is left alone.
std::shared_ptr<py::object> hold(py::object object);

// Runs an op with the GIL released (its kernels may take long; other Python threads
// run meanwhile): Python arguments are converted before, the result after. Bindings
// whose arguments are all C++ types take py::call_guard<py::gil_scoped_release>.
// Ctrl-C stops such a call at its next kernel (loom/interrupt.h): a request made
// before the call started is forgotten.
struct ReleasedCall {
  ReleasedCall() { clear_interrupt(); }
  py::gil_scoped_release release;
};
template <typename Fn>
auto released(Fn&& op) {
  ReleasedCall during;
  return op();
}
using Release = py::call_guard<ReleasedCall>;

// A Python value's type name, for TypeErrors.
std::string type_name(const py::handle& value);

// An operand beside `like`: a Tensor, or a Python number as a 0-d tensor of the dtype
// PyTorch gives it: like's where like is of the number's kind or higher, else the
// default (float32 for a float, int64 for an int), so int64 + 0.5 promotes to float32.
Tensor operand(const Tensor& like, const py::handle& value);

// Dims as PyTorch takes them: None (all), an int, or a sequence of ints (else a
// TypeError naming 'dim').
Shape dims_of(const py::object& dim);

// The dtype named by a Python value: a loom dtype or None (-> fallback); else a
// TypeError naming 'dtype'.
DType dtype_or(const py::handle& dtype, DType fallback);

}  // namespace loom::python
