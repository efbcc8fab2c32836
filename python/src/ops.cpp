// The ops as Python functions. Every registered op is in `loom.ops` by its
// registered call (tensors in, a tensor out), read from the registry when the
// module loads: an op added in C++ reaches Python with no binding written for
// it. The ops that take attributes (dims, eps, p...) are bound below by hand,
// with PyTorch's argument names; loom/__init__.py puts both at the top level.
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

// An optional tensor argument (a mask, a weight): a loom.Tensor or None.
Tensor optional_tensor(const py::object& t, const char* name) {
  if (t.is_none()) return Tensor();
  if (!py::isinstance<Tensor>(t))
    throw py::type_error(std::string("argument '") + name + "' must be a loom.Tensor or None, got " + type_name(t));
  return t.cast<Tensor>();
}

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

  // Reductions (sum, mean, amax, amin, logsumexp, var, argmax, argmin) come from their schemas (signatures.cpp)

  // Products, shapes, joins (matmul, cat, stack, transpose, triu, tril: from their schemas)
  m.def(
      "split", [](const Tensor& x, int64_t size, int64_t dim) { return split(x, size, dim); }, py::arg("tensor"),
      py::arg("split_size"), py::arg("dim") = 0, Release());
  m.def(
      "chunk", [](const Tensor& x, int64_t chunks, int64_t dim) { return chunk(x, chunks, dim); }, py::arg("input"),
      py::arg("chunks"), py::arg("dim") = 0, Release());
  m.def(
      "reshape", [](const Tensor& x, const Shape& shape) { return reshape(x, shape); }, py::arg("input"),
      py::arg("shape"), Release());
  m.def(
      "permute", [](const Tensor& x, const Shape& dims) { return permute(x, dims); }, py::arg("input"), py::arg("dims"),
      Release());
  m.def(
      "pad", [](const Tensor& x, const Shape& pads, double value) { return pad(x, pads, value); }, py::arg("input"),
      py::arg("pad"), py::arg("value") = 0.0, Release());

  // Elementwise with attributes
  m.def(
      "where",
      [](const Tensor& c, const py::object& a, const py::object& b) {
        // Python numbers take PyTorch's dtypes beside the other operand (or the condition).
        const Tensor like = py::isinstance<Tensor>(a)   ? a.cast<Tensor>()
                            : py::isinstance<Tensor>(b) ? b.cast<Tensor>()
                                                        : c;
        const Tensor x = operand(like, a), y = operand(like, b);
        return released([&] { return where(c, x, y); });
      },
      py::arg("condition"), py::arg("input"), py::arg("other"));

  // Indexing (gather, index_select, scatter_add, narrow, select: from their schemas)
  m.def(
      "embedding",
      [](const Tensor& ids, const Tensor& weight, int64_t padding_idx) { return embedding(weight, ids, padding_idx); },
      py::arg("input"), py::arg("weight"), py::arg("padding_idx") = -1, Release());

  // The fused ops
  m.def(
      "layer_norm",
      [](const Tensor& x, const py::object& weight, const py::object& bias, double eps) {
        const Tensor w = optional_tensor(weight, "weight"), b = optional_tensor(bias, "bias");
        return released([&] { return layer_norm(x, w, b, eps); });
      },
      py::arg("input"), py::arg("weight") = py::none(), py::arg("bias") = py::none(), py::arg("eps") = 1e-5);
  m.def(
      "dropout", [](const Tensor& x, double p, bool training) { return dropout(x, p, training); }, py::arg("input"),
      py::arg("p") = 0.5, py::arg("training") = true, Release());
  m.def(
      "cross_entropy",
      [](const Tensor& logits, const Tensor& target, int64_t ignore_index, const std::string& reduction,
         double label_smoothing) {
        CrossEntropyOptions options{.label_smoothing = label_smoothing, .ignore_index = ignore_index};
        if (reduction == "sum")
          options.reduction = Reduction::sum;
        else if (reduction == "none")
          options.reduction = Reduction::none;
        else if (reduction != "mean")
          throw py::value_error("cross_entropy: reduction must be 'mean', 'sum' or 'none', got '" + reduction + "'");
        return cross_entropy(logits, target, options);
      },
      py::arg("input"), py::arg("target"), py::kw_only(), py::arg("ignore_index") = -100, py::arg("reduction") = "mean",
      py::arg("label_smoothing") = 0.0, Release());
  m.def(
      "scaled_dot_product_attention",
      [](const Tensor& q, const Tensor& k, const Tensor& v, const py::object& mask, double dropout_p) {
        const Tensor m = optional_tensor(mask, "mask");
        return released([&] { return scaled_dot_product_attention(q, k, v, m, dropout_p, dropout_p > 0); });
      },
      py::arg("query"), py::arg("key"), py::arg("value"), py::arg("mask") = py::none(), py::arg("dropout_p") = 0.0,
      "loom's convention: a bool mask is True where a query may NOT attend (loom.scaled_dot_product_attention "
      "takes PyTorch's)");
}

}  // namespace loom::python
