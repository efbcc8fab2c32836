// The ops as Python functions. Every registered op is in `loom.ops` by its
// registered call (tensors in, a tensor out), read from the registry when the
// module loads: an op added in C++ reaches Python with no binding written for
// it. An op with a schema is also `loom.<op>` with torch's arguments
// (signatures.cpp); the factories and split are bound below by hand.
#include <fmt/format.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <utility>

#include "bindings.h"
#include "loom/ops.h"
#include "loom/ops/shape.h"
#include "loom/registry.h"

namespace loom::python {

namespace {

TensorOptions options_of(const py::object& dtype, const std::string& device) {
  return {dtype_or(dtype, DType::f32), parse_device(device)};
}

// A factory's size as PyTorch takes it: loom.zeros(2, 3) or loom.zeros([2, 3]) (or a torch.Size).
Shape size_of(const py::args& size, const char* factory) {
  if (size.size() == 0)  // as torch: zeros() is an error, zeros([]) a 0-d tensor
    throw py::type_error(std::string("loom.") + factory + ": a size is required ([] for a 0-d tensor)");
  if (size.size() == 1 && !PyIndex_Check(size[0].ptr())) {
    try {
      return size[0].cast<Shape>();
    } catch (const py::cast_error&) {
      throw py::type_error(std::string("loom.") + factory + ": size must be ints or a sequence of ints, got " +
                           type_name(size[0]));
    }
  }
  Shape shape;
  for (const auto& n : size) {
    if (!PyIndex_Check(n.ptr()))
      throw py::type_error(std::string("loom.") + factory + ": size must be ints or a sequence of ints, got " +
                           type_name(n));
    shape.push_back(py::reinterpret_steal<py::object>(PyNumber_Index(n.ptr())).cast<int64_t>());
  }
  return shape;
}

// loom.zeros / loom.ones: filled with a value.
template <Tensor (*fill)(const Shape&, TensorOptions)>
void bind_filled(py::module_& m, const char* name) {
  m.def(
      name,
      [name](const py::args& size, const py::object& dtype, const std::string& device) {
        const Shape shape = size_of(size, name);
        const TensorOptions options = options_of(dtype, device);
        return released([&] { return fill(shape, options); });
      },
      py::kw_only(), py::arg("dtype") = py::none(), py::arg("device") = "cpu");
}

// loom.rand / loom.randn: drawn from the default generator (loom.manual_seed).
template <Tensor (*draw)(const Shape&, TensorOptions, Generator&, double, double)>
void bind_random(py::module_& m, const char* name) {
  m.def(
      name,
      [name](const py::args& size, const py::object& dtype, bool requires_grad) {
        Tensor t = draw(size_of(size, name), {dtype_or(dtype, DType::f32)}, default_generator(), 0, 1);
        return t.requires_grad_(requires_grad);
      },
      py::kw_only(), py::arg("dtype") = py::none(), py::arg("requires_grad") = false);
}

// How many tensors an op's default call reads, from its samples (those that use the
// default call; all of them if none does): the fewest and the most (they differ for cat).
std::pair<size_t, size_t> default_arity(const OpInfo& op) {
  size_t fewest = SIZE_MAX, most = 0;
  for (bool own_call_too : {false, true}) {
    for (const Sample& sample : op.samples) {
      if ((sample.call || !sample.attributes.empty()) && !own_call_too) continue;
      fewest = std::min(fewest, sample.inputs.size());
      most = std::max(most, sample.inputs.size());
    }
    if (most > 0) break;
  }
  return {fewest == SIZE_MAX ? 0 : fewest, most};
}

void bind_registry(py::module_ ops) {
  py::list names;
  for (const OpInfo& op : registered_ops()) {
    names.append(op.name);
    const std::string doc = op.formula + "\n\nderivative: " + op.derivative + "\nshape: " + op.shape_rule;
    ops.def(
        op.name.c_str(),
        [call = op.call, name = op.name, arity = default_arity(op)](const py::args& args) {
          const auto [fewest, most] = arity;  // a call with too few tensors would read past them
          if (args.size() < fewest || (fewest == most && args.size() != most))
            throw py::type_error(fmt::format("loom.ops.{}: takes {}{} tensor{}, got {} argument{}", name,
                                             fewest == most ? "" : "at least ", fewest, fewest == 1 ? "" : "s",
                                             args.size(), args.size() == 1 ? "" : "s"));
          OpArgs inputs;
          for (const auto& a : args) {
            if (!py::isinstance<Tensor>(a))
              throw py::type_error("loom.ops." + name + ": argument " + std::to_string(inputs.size() + 1) +
                                   " must be a loom.Tensor, got " + type_name(a));
            inputs.push_back(a.cast<Tensor>());
          }
          ReleasedCall during;  // the GIL released, Ctrl-C stops it
          return call(inputs);
        },
        doc.c_str());
  }
  ops.attr("__all__") = names;
}

}  // namespace

void bind_ops(py::module_& m) {
  bind_registry(m.def_submodule("ops", "every registered op, called with tensors only (loom.explain shows each)"));

  // Factories
  bind_filled<zeros>(m, "zeros");
  bind_filled<ones>(m, "ones");
  m.def(
      "full",
      [](const Shape& shape, double value, const py::object& dtype, const std::string& device) {
        const TensorOptions options = options_of(dtype, device);
        return released([&] { return full(shape, value, options); });
      },
      py::arg("shape"), py::arg("fill_value"), py::kw_only(), py::arg("dtype") = py::none(), py::arg("device") = "cpu");
  m.def(
      "arange", [](int64_t end, const py::object& dtype) { return arange(end, {dtype_or(dtype, DType::i64)}); },
      py::arg("end"), py::kw_only(), py::arg("dtype") = py::none());
  bind_random<randn>(m, "randn");
  bind_random<rand>(m, "rand");
  m.def("manual_seed", &manual_seed, py::arg("seed"));

  // Every op with a schema is bound from it (signatures.cpp); split takes an int or a
  // list of sizes, which loom/__init__.py tells apart over this one.
  m.def(
      "split", [](const Tensor& x, int64_t size, int64_t dim) { return split(x, size, dim); }, py::arg("tensor"),
      py::arg("split_size"), py::arg("dim") = 0, Release());
}

}  // namespace loom::python
