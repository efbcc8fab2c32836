// loom.Tensor: the C++ Tensor handle, with PyTorch's names for what it does.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <pybind11/functional.h>
#include <pybind11/operators.h>
#include <pybind11/stl.h>

#include "bindings.h"
#include "loom/ops.h"
#include "loom/ops/shape.h"

namespace loom::python {

namespace {

py::object scalar_of(const Tensor& t) {
  LOOM_CHECK(t.numel() == 1, "item: a tensor of {} elements has no single value", t.numel());
  if (t.dtype() == DType::b8) return py::bool_(t.to(DType::i64).item<int64_t>() != 0);
  if (!is_floating(t.dtype())) return py::int_(t.to(DType::i64).item<int64_t>());
  return py::float_(t.to(DType::f64).item<double>());
}

// An index list or tensor as int64 ids (bool masks are not taken).
Tensor ids_of(const py::handle& item, int64_t named) {
  if (py::isinstance<py::list>(item)) {
    std::vector<int64_t> ids;
    for (auto v : item) {
      if (!PyIndex_Check(v.ptr()) || py::isinstance<py::bool_>(v))
        throw py::index_error(
            fmt::format("index for dimension {}: a list of ints, got a {} in it", named, type_name(v)));
      ids.push_back(py::reinterpret_steal<py::object>(PyNumber_Index(v.ptr())).cast<int64_t>());
    }
    return from_vector(ids, {static_cast<int64_t>(ids.size())});
  }
  const Tensor ids = item.cast<Tensor>();
  if (ids.dtype() != DType::i64 && ids.dtype() != DType::i32)
    throw py::index_error(
        fmt::format("index for dimension {}: tensors used as indices must be int64 or int32, got {}{}", named,
                    dtype_name(ids.dtype()),
                    ids.dtype() == DType::b8 ? " (boolean masks are not supported: use masked_fill "
                                               "or where)"
                                             : ""));
  return ids.to(DType::i64).to(kCPU);
}

// x's rows `ids` (any shape) along dim d: that dim becomes ids' dims. Negative ids count
// from the end, as in PyTorch; one out of range is an IndexError.
Tensor take(const Tensor& x, int64_t d, const Tensor& ids, int64_t named) {
  const int64_t size = x.size(d);
  Tensor flat = ids.reshape({-1}).contiguous();
  std::vector<int64_t> wrapped(flat.data<int64_t>(), flat.data<int64_t>() + flat.numel());
  for (int64_t& i : wrapped) {
    if (i < -size || i >= size)
      throw py::index_error(fmt::format("index {} is out of bounds for dimension {} with size {}", i, named, size));
    if (i < 0) i += size;
  }
  Tensor picked = released([&] { return index_select(x, d, from_vector(wrapped, {flat.numel()}).to(x.device())); });
  Shape shape(x.shape().begin(), x.shape().begin() + d);
  shape.insert(shape.end(), ids.shape().begin(), ids.shape().end());
  shape.insert(shape.end(), x.shape().begin() + d + 1, x.shape().end());
  return picked.reshape(shape);
}

// x[i], x[a:b:s], x[None], x[...], and tuples of them, as views (PyTorch's basic indexing);
// one list or integer tensor among them picks rows along its dim (a copy, as PyTorch's).
Tensor index(const Tensor& x, const py::object& key) {
  py::tuple items = py::isinstance<py::tuple>(key) ? py::reinterpret_borrow<py::tuple>(key) : py::make_tuple(key);
  int64_t consumed = 0, ellipses = 0;  // dims of x the key names; how many ...
  for (auto item : items) {
    if (py::isinstance<py::ellipsis>(item))
      ++ellipses;
    else if (!item.is_none())
      ++consumed;
  }
  // IndexError, as in PyTorch: list(t) and unpacking stop on it.
  if (ellipses > 1) throw py::index_error("an index can only have a single ellipsis ('...')");
  if (consumed > x.dim()) throw py::index_error(fmt::format("too many indices for tensor of dimension {}", x.dim()));
  Tensor out = x;
  int64_t d = 0, named = 0, advanced = 0;  // the dim of `out` the next item applies to; the dim of `x` it names
  for (auto item : items) {
    if (item.is_none()) {
      out = out.unsqueeze(d++);
    } else if (py::isinstance<py::ellipsis>(item)) {
      d += x.dim() - consumed;
      named += x.dim() - consumed;
    } else if (py::isinstance<py::slice>(item)) {
      Py_ssize_t start = 0, stop = 0, step = 0, length = 0;
      if (!item.cast<py::slice>().compute(out.size(d), &start, &stop, &step, &length)) throw py::error_already_set();
      LOOM_CHECK(step > 0, "index: a slice step must be positive, got {}", step);
      out = out.slice(d++, start, start + length * step, step);
      ++named;
    } else if (!py::isinstance<Tensor>(item) && PyIndex_Check(item.ptr())) {  // int, bool, NumPy integers
      const auto i = py::reinterpret_steal<py::object>(PyNumber_Index(item.ptr())).cast<int64_t>();
      const int64_t size = out.size(d);
      if (i < -size || i >= size)
        throw py::index_error(fmt::format("index {} is out of bounds for dimension {} with size {}", i, named, size));
      out = out.select(d, i);
      ++named;
    } else if (py::isinstance<py::list>(item) || py::isinstance<Tensor>(item)) {
      if (advanced > 0)  // PyTorch broadcasts several together; loom takes one
        throw py::index_error("index: one list or tensor among the indices at most");
      out = take(out, d, ids_of(item, named), named);  // the dim becomes the ids' dims
      d += py::isinstance<Tensor>(item) ? item.cast<Tensor>().dim() : 1;
      ++named;
      ++advanced;
    } else {
      throw py::type_error("index: expected an int, a slice, None, ..., a list of ints or an integer tensor, got " +
                           type_name(item));
    }
  }
  return out;
}

}  // namespace

Tensor operand(const Tensor& like, const py::handle& value) {
  if (py::isinstance<Tensor>(value)) return value.cast<Tensor>();
  DType dtype = like.dtype();
  if (py::isinstance<py::bool_>(value)) {
    // bool is the lowest kind: the tensor's dtype
  } else if (PyIndex_Check(value.ptr())) {  // int, NumPy integers
    if (dtype == DType::b8) dtype = DType::i64;
    if (!is_floating(dtype)) {  // exact, past 2^53 too
      Tensor n = Tensor::empty({}, {DType::i64});
      *n.data<int64_t>() = py::reinterpret_steal<py::object>(PyNumber_Index(value.ptr())).cast<int64_t>();
      return n.to(dtype).to(like.device());
    }
  } else if (PyFloat_Check(value.ptr())) {
    if (!is_floating(dtype)) dtype = DType::f32;
  } else {
    throw py::type_error("expected a loom.Tensor or a number, got " + type_name(value));
  }
  return full(Shape{}, value.cast<double>(), {dtype, like.device()});
}

namespace {

// x ** e: a number keeps the scalar exponent's op; a tensor exponent gets its own gradient.
Tensor power(const Tensor& x, const py::object& exponent) {
  if (PyFloat_Check(exponent.ptr()) || (PyIndex_Check(exponent.ptr()) && !py::isinstance<py::bool_>(exponent))) {
    const double e = exponent.cast<double>();
    return released([&] { return pow(x, e); });
  }
  const Tensor e = operand(x, exponent);
  return released([&] { return pow(x, e); });
}

template <Tensor (*op)(const Tensor&, const Tensor&, Where)>
void binary(py::class_<Tensor>& cls, const char* name, const char* reflected) {
  cls.def(name, [](const Tensor& a, const py::object& b) {
    const Tensor other = operand(a, b);
    return released([&] { return op(a, other, Where::current()); });
  });
  if (reflected)
    cls.def(reflected, [](const Tensor& a, const py::object& b) {
      const Tensor other = operand(a, b);
      return released([&] { return op(other, a, Where::current()); });
    });
}

}  // namespace

std::string type_name(const py::handle& value) { return py::str(value.get_type().attr("__name__")); }

Shape dims_of(const py::object& dim) {
  if (dim.is_none()) return {};
  if (py::isinstance<py::int_>(dim)) return {dim.cast<int64_t>()};
  try {
    return dim.cast<Shape>();
  } catch (const py::cast_error&) {
    throw py::type_error("argument 'dim' must be None, an int or a sequence of ints, got " + type_name(dim));
  }
}

DType dtype_or(const py::handle& dtype, DType fallback) {
  if (dtype.is_none()) return fallback;
  if (!py::isinstance<DType>(dtype))
    throw py::type_error("argument 'dtype' must be a loom dtype (loom.float32, loom.int64...) or None, got " +
                         type_name(dtype));
  return dtype.cast<DType>();
}

void bind_tensor(py::module_& m) {
  py::enum_<DType>(m, "dtype")
      .value("float32", DType::f32)
      .value("float64", DType::f64)
      .value("int32", DType::i32)
      .value("int64", DType::i64)
      .value("bool", DType::b8)
      .value("bfloat16", DType::bf16);

  py::class_<Tensor> cls(m, "Tensor", py::buffer_protocol());
  cls.def_property_readonly("shape", [](const Tensor& t) { return py::tuple(py::cast(t.shape())); })
      .def(
          "size",
          [](const Tensor& t, const py::object& dim) -> py::object {
            if (dim.is_none()) return py::tuple(py::cast(t.shape()));
            return py::int_(t.size(dim.cast<int64_t>()));
          },
          py::arg("dim") = py::none())
      .def("stride", [](const Tensor& t) { return py::tuple(py::cast(t.strides())); })
      .def_property_readonly("ndim", &Tensor::dim)
      .def("dim", &Tensor::dim)
      .def("numel", &Tensor::numel)
      .def("__len__",
           [](const Tensor& t) {
             if (t.dim() == 0) throw py::type_error("len() of a 0-d tensor");
             return t.size(0);
           })
      .def("__iter__",
           [](const Tensor& t) {  // the rows along dim 0, as PyTorch's (a, b = t unpacks them)
             if (t.dim() == 0) throw py::type_error("iteration over a 0-d tensor");
             py::list rows;
             for (int64_t i = 0; i < t.size(0); ++i) rows.append(py::cast(t.select(0, i)));
             return py::iter(rows);
           })
      .def_property_readonly("dtype", &Tensor::dtype)
      .def_property_readonly("device", [](const Tensor& t) { return t.device().str(); })
      .def_property("requires_grad", &Tensor::requires_grad, [](Tensor& t, bool enabled) { t.requires_grad_(enabled); })
      .def(
          "requires_grad_", [](Tensor& t, bool enabled) { return t.requires_grad_(enabled); },
          py::arg("requires_grad") = true)
      .def_property_readonly("is_leaf", &Tensor::is_leaf)
      .def_property_readonly("grad_fn",
                             [](const Tensor& t) -> py::object {
                               if (!t.grad_fn()) return py::none();
                               return py::str(t.grad_fn()->name);
                             })
      .def_property(
          "grad",
          [](const Tensor& t) -> py::object {
            Tensor g = t.grad();
            return g.defined() ? py::cast(g) : py::none();
          },
          [](const Tensor& t, const py::object& g) { t.set_grad(g.is_none() ? Tensor() : g.cast<Tensor>()); })
      .def_property(
          "name", [](const Tensor& t) { return t.name(); }, [](Tensor& t, std::string name) { t.set_name(name); })
      .def(
          "backward",
          [](const Tensor& t, const py::object& gradient, bool retain_graph, bool create_graph) {
            Tensor g = gradient.is_none() ? Tensor() : gradient.cast<Tensor>();
            ReleasedCall during;  // the GIL released, Ctrl-C stops it
            t.backward(g, retain_graph, create_graph);
          },
          py::arg("gradient") = py::none(), py::arg("retain_graph") = false, py::arg("create_graph") = false)
      .def("retain_grad", &Tensor::retain_grad)
      .def("detach", &Tensor::detach)
      .def("item", &scalar_of)
      .def("__float__", [](const Tensor& t) { return scalar_of(t.to(DType::f64)).cast<double>(); })
      .def("__int__", [](const Tensor& t) { return scalar_of(t.to(DType::i64)).cast<int64_t>(); })
      .def("__bool__", [](const Tensor& t) { return scalar_of(t.to(DType::i64)).cast<int64_t>() != 0; })
      .def("__repr__", &Tensor::str)
      .def("is_contiguous", &Tensor::is_contiguous)
      .def("contiguous", &Tensor::contiguous, Release())
      .def("to",
           [](const Tensor& t, const py::object& target) {
             if (py::isinstance<py::str>(target)) {
               const Device device = parse_device(target.cast<std::string>());
               return released([&] { return t.to(device); });
             }
             if (target.is_none()) throw py::type_error("Tensor.to: give a dtype or a device name, got None");
             const DType dtype = dtype_or(target, DType::f32);
             return released([&] { return t.to(dtype); });
           })
      .def(
          "float", [](const Tensor& t) { return t.to(DType::f32); }, Release())
      .def(
          "double", [](const Tensor& t) { return t.to(DType::f64); }, Release())
      .def(
          "long", [](const Tensor& t) { return t.to(DType::i64); }, Release())
      // Views and shape
      .def("t", &Tensor::t)
      .def_property_readonly("T", &Tensor::t)
      .def("__getitem__", &index)
      // Elementwise ops and views (exp, relu, reshape, squeeze...) come from their schemas (signatures.cpp)
      .def("pow", &power)
      .def("__pow__", &power)
      .def("__rpow__",
           [](const Tensor& t, const py::object& base) {
             const Tensor b = operand(t, base);
             return released([&] { return pow(b, t); });
           })
      .def(
          "__neg__", [](const Tensor& t) { return -t; }, Release())
      .def(
          "__matmul__", [](const Tensor& a, const Tensor& b) { return matmul(a, b); }, Release())
      .def(
          "register_hook",
          [](const Tensor& t, py::function hook) {
            // The hook runs wherever backward runs (the GIL released): it takes the GIL to call Python.
            std::string name = py::str(py::getattr(hook, "__qualname__", py::repr(hook)));
            return t.register_hook([held = hold(std::move(hook)), name](const Tensor& grad) {
              py::gil_scoped_acquire acquire;
              py::object result = (*held)(grad);
              if (result.is_none()) return grad;
              if (!py::isinstance<Tensor>(result))
                throw py::type_error(
                    fmt::format("hook {} returned {}: a hook returns a loom.Tensor or None", name, type_name(result)));
              Tensor replaced = result.cast<Tensor>();
              if (replaced.shape() != grad.shape() || replaced.dtype() != grad.dtype())
                throw py::value_error(fmt::format("hook {} returned a {} gradient of shape {} for a {} one of shape {}",
                                                  name, dtype_name(replaced.dtype()), replaced.shape(),
                                                  dtype_name(grad.dtype()), grad.shape()));
              return replaced;
            });
          },
          py::arg("hook"));
  binary<add>(cls, "__add__", "__radd__");
  binary<sub>(cls, "__sub__", "__rsub__");
  binary<mul>(cls, "__mul__", "__rmul__");
  binary<div>(cls, "__truediv__", "__rtruediv__");
  binary<eq>(cls, "__eq__", nullptr);
  binary<ne>(cls, "__ne__", nullptr);
  binary<lt>(cls, "__lt__", nullptr);
  binary<le>(cls, "__le__", nullptr);
  binary<gt>(cls, "__gt__", nullptr);
  binary<ge>(cls, "__ge__", nullptr);
  binary<maximum>(cls, "maximum", nullptr);
  binary<minimum>(cls, "minimum", nullptr);
  cls.attr("__hash__") = py::none();  // == is elementwise, as in NumPy and PyTorch
}

}  // namespace loom::python
