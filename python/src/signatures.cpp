// loom.<op> and Tensor.<op> made from each registered op's schema (loom/op_schema.h):
// torch's argument names, order and defaults, every argument by position or by name,
// and a TypeError in torch's words naming the argument that is wrong.
#include <pybind11/stl.h>

#include <array>

#include "bindings.h"
#include "loom/registry.h"

namespace loom::python {

namespace {

constexpr size_t kMaxParameters = OpSchema::kMaxParameters;

[[noreturn]] void refuse(const OpSchema& s, const std::string& why) {
  throw py::type_error(fmt::format("loom.{}: {}", s.name, why));
}

// The ops whose Tensor arguments take Python numbers too, as torch's argument parser
// lets them (torch.add(x, 2), torch.where(c, x, 0.0)); the number becomes a 0-d tensor
// beside the call's first tensor (loom/tensor.cpp's `operand`: torch's dtype rules).
bool numbers_as_tensors(std::string_view op) {
  static constexpr std::array<std::string_view, 11> kOps = {"add", "sub", "mul", "div", "eq",   "ne",
                                                            "lt",  "le",  "gt",  "ge",  "where"};
  return std::find(kOps.begin(), kOps.end(), op) != kOps.end();
}

bool is_number(py::handle v) { return PyFloat_Check(v.ptr()) || PyLong_Check(v.ptr()); }

// v as a Tensor, or nullopt for anything else (one type lookup, where isinstance and cast take two).
std::optional<Tensor> as_tensor(py::handle v) {
  py::detail::make_caster<Tensor> caster;
  if (!caster.load(v, false)) return std::nullopt;
  return py::detail::cast_op<Tensor>(std::move(caster));
}

// One Python value as parameter p's type (position counts from 1).
ArgumentValue argument_from(const OpSchema& s, const Parameter& p, size_t position, py::handle v) {
  auto wrong = [&](std::string_view expected, std::string_view detail = "") {
    refuse(s, fmt::format("argument '{}' (position {}) must be {}{}, got {}{}", p.name, position, expected,
                          p.optional ? " or None" : "", type_name(v), detail));
  };
  if (v.is_none()) {
    if (!p.optional) wrong(type_name(p.type));
    return std::monostate{};
  }
  auto is_int = [](py::handle x) { return py::isinstance<py::int_>(x) && !py::isinstance<py::bool_>(x); };
  switch (p.type) {
    case ArgumentType::tensor:
      if (is_number(v) && numbers_as_tensors(s.name)) return std::monostate{};  // made a tensor once all are read
      if (std::optional<Tensor> t = as_tensor(v)) return std::move(*t);
      wrong("loom.Tensor");
      break;
    case ArgumentType::tensor_list: {
      if (!py::isinstance<py::sequence>(v) || py::isinstance<py::str>(v)) wrong("a sequence of loom.Tensors");
      std::vector<Tensor> tensors;
      for (py::handle item : v.cast<py::sequence>()) {
        if (!py::isinstance<Tensor>(item))
          wrong("a sequence of loom.Tensors", fmt::format(" (item {} is {})", tensors.size(), type_name(item)));
        tensors.push_back(item.cast<Tensor>());
      }
      return tensors;
    }
    case ArgumentType::integer:
      if (!is_int(v)) wrong("int");
      return v.cast<int64_t>();
    case ArgumentType::integer_list: {
      if (is_int(v)) return std::vector<int64_t>{v.cast<int64_t>()};  // one dim for a list of one, as torch
      if (!py::isinstance<py::tuple>(v) && !py::isinstance<py::list>(v)) wrong("an int or a sequence of ints");
      std::vector<int64_t> values;
      for (py::handle item : v.cast<py::sequence>()) {
        if (!is_int(item)) wrong("an int or a sequence of ints");
        values.push_back(item.cast<int64_t>());
      }
      return values;
    }
    case ArgumentType::number:
      if (!is_int(v) && !py::isinstance<py::float_>(v)) wrong("float");
      return v.cast<double>();
    case ArgumentType::boolean:
      if (!py::isinstance<py::bool_>(v)) wrong("bool");
      return v.cast<bool>();
    case ArgumentType::text:
      if (!py::isinstance<py::str>(v)) wrong("str");
      return v.cast<std::string>();
  }
  wrong(type_name(p.type));
  return std::monostate{};
}

// A method's sizes given one by one, as torch takes them where the list is the only
// argument after the tensor: x.reshape(2, 3), x.permute(1, 0).
bool sizes_one_by_one(const std::vector<Parameter>& params, size_t takes, py::handle self, const py::args& args) {
  return self && takes == 2 && params[1].type == ArgumentType::integer_list && args.size() >= 1 &&
         PyLong_Check(args[0].ptr());
}

// The call's values in the schema's order: positional ones first (`self`, where not
// null, then `args`), then keywords, then the defaults; too many, unknown, repeated
// or missing arguments are TypeErrors as Python's own.
std::vector<ArgumentValue> arguments_from(const OpSchema& s, py::handle self, const py::args& given_args,
                                          const py::kwargs& keywords) {
  const std::vector<Parameter>& params = s.parameters;
  const auto takes = static_cast<size_t>(
      std::find_if(params.begin(), params.end(), [](const Parameter& p) { return p.keyword_only; }) - params.begin());
  const py::args args =
      sizes_one_by_one(params, takes, self, given_args) ? py::args(py::make_tuple(given_args)) : given_args;
  const size_t first = self ? 1 : 0, positional = first + args.size();
  if (positional > takes)
    refuse(s,
           fmt::format("takes {} positional argument{} but {} were given", takes, takes == 1 ? "" : "s", positional));
  std::vector<ArgumentValue> values(params.size());
  std::array<PyObject*, kMaxParameters> given{};  // a vector here cost a tenth of a call
  if (self) values[0] = argument_from(s, params[0], 1, self), given[0] = self.ptr();
  for (size_t i = 0; i < args.size(); ++i)
    values[first + i] = argument_from(s, params[first + i], first + i + 1, args[i]), given[first + i] = args[i].ptr();
  for (const auto& [key, value] : keywords) {
    const std::string_view name = PyUnicode_AsUTF8(key.ptr());
    const auto at = static_cast<size_t>(
        std::find_if(params.begin(), params.end(), [&](const Parameter& p) { return p.name == name; }) -
        params.begin());
    if (at == params.size()) refuse(s, fmt::format("got an unexpected keyword argument '{}'", name));
    if (given[at]) refuse(s, fmt::format("got multiple values for argument '{}'", name));
    values[at] = argument_from(s, params[at], at + 1, value), given[at] = value.ptr();
  }
  const Tensor* like = nullptr;  // numbers given for tensors take their dtype beside the first tensor
  for (size_t i = 0; i < params.size(); ++i) {
    if (given[i]) {
      if (!like) like = std::get_if<Tensor>(&values[i]);
      continue;
    }
    if (!params[i].default_value)
      refuse(s, fmt::format("missing required argument '{}' (position {})", params[i].name, i + 1));
    values[i] = *params[i].default_value;
  }
  for (size_t i = 0; i < params.size(); ++i) {
    if (params[i].type != ArgumentType::tensor || !given[i] || !is_number(given[i])) continue;
    if (!like)
      refuse(s, fmt::format("argument '{}' is a number, and so are the others: give a tensor", params[i].name));
    values[i] = operand(*like, given[i]);
  }
  return values;
}

py::object result_of(OpResult result) {
  if (Tensor* one = std::get_if<Tensor>(&result)) return py::cast(std::move(*one));
  return py::tuple(py::cast(std::get<std::vector<Tensor>>(result)));  // as torch's split and chunk
}

// An op of tensors only, called with tensors by position (x.relu(), loom.mul(a, b)): its
// call straight away, without the Arguments by name (a third of such a call's time).
std::optional<OpArgs> tensors_by_position(const OpInfo& op, py::handle self, const py::args& args,
                                          const py::kwargs& keywords) {
  const size_t count = (self ? 1 : 0) + args.size();
  if (!keywords.empty() || count != op.signature->parameters.size()) return std::nullopt;
  OpArgs inputs;
  inputs.reserve(count);
  auto add = [&](py::handle v) {
    std::optional<Tensor> t = as_tensor(v);
    if (t) inputs.push_back(std::move(*t));
    return t.has_value();
  };
  if (self && !add(self)) return std::nullopt;
  for (py::handle v : args)
    if (!add(v)) return std::nullopt;  // a number or a wrong argument: the general path names it
  return inputs;
}

py::object invoke(const OpInfo& op, bool tensors_only, py::handle self, const py::args& args,
                  const py::kwargs& keywords) {
  if (tensors_only) {
    if (std::optional<OpArgs> inputs = tensors_by_position(op, self, args, keywords)) {
      Tensor out;
      {
        ReleasedCall during;
        out = op.call(*inputs);
      }
      return py::cast(std::move(out));
    }
  }
  Arguments arguments(*op.signature, arguments_from(*op.signature, self, args, keywords));
  OpResult result;
  {
    ReleasedCall during;  // the GIL released, Ctrl-C stops it
    result = op.invoke(arguments);
  }
  return result_of(std::move(result));
}

}  // namespace

void bind_signatures(py::module_& m) {
  py::object tensor_class = py::type::of<Tensor>();
  for (const OpInfo& op : registered_ops()) {
    if (!op.signature) continue;
    const std::string doc =
        fmt::format("{}\n\n{}\nderivative: {}\nshape: {}", op.schema, op.formula, op.derivative, op.shape_rule);
    const OpInfo* info = &op;  // the registry lives as long as the process
    const bool tensors_only = op.signature->tensors_only();
    m.def(
        op.name.c_str(),
        [info, tensors_only](const py::args& args, const py::kwargs& keywords) {
          return invoke(*info, tensors_only, {}, args, keywords);
        },
        doc.c_str());
    // The method: the tensor is the first argument (torch's Tensor.<op>).
    if (op.signature->parameters.front().type != ArgumentType::tensor) continue;  // cat, stack
    py::setattr(tensor_class, op.name.c_str(),
                py::cpp_function(
                    [info, tensors_only](py::handle self, const py::args& args, const py::kwargs& keywords) {
                      return invoke(*info, tensors_only, self, args, keywords);
                    },
                    py::name(op.name.c_str()), py::is_method(tensor_class), py::doc(doc.c_str())));
  }
}

}  // namespace loom::python
