// loom.<op> and Tensor.<op> made from each registered op's schema (loom/op_schema.h):
// torch's argument names, order and defaults, every argument by position or by name,
// and a TypeError in torch's words naming the argument that is wrong.
#include <array>

#include "bindings.h"
#include "loom/registry.h"

namespace loom::python {

namespace {

constexpr size_t kMaxParameters = OpSchema::kMaxParameters;

[[noreturn]] void refuse(const OpSchema& s, const std::string& why) {
  throw py::type_error(fmt::format("loom.{}: {}", s.name, why));
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
      if (!py::isinstance<Tensor>(v)) wrong("loom.Tensor");
      return v.cast<Tensor>();
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

// The call's values in the schema's order: positional ones first (`self`, where not
// null, then `args`), then keywords, then the defaults; too many, unknown, repeated
// or missing arguments are TypeErrors as Python's own.
std::vector<ArgumentValue> arguments_from(const OpSchema& s, py::handle self, const py::args& args,
                                          const py::kwargs& keywords) {
  const std::vector<Parameter>& params = s.parameters;
  const auto takes = static_cast<size_t>(
      std::find_if(params.begin(), params.end(), [](const Parameter& p) { return p.keyword_only; }) - params.begin());
  const size_t first = self ? 1 : 0, positional = first + args.size();
  if (positional > takes)
    refuse(s,
           fmt::format("takes {} positional argument{} but {} were given", takes, takes == 1 ? "" : "s", positional));
  std::vector<ArgumentValue> values(params.size());
  std::array<bool, kMaxParameters> given{};  // a vector here cost a tenth of a call
  if (self) values[0] = argument_from(s, params[0], 1, self), given[0] = 1;
  for (size_t i = 0; i < args.size(); ++i)
    values[first + i] = argument_from(s, params[first + i], first + i + 1, args[i]), given[first + i] = 1;
  for (const auto& [key, value] : keywords) {
    const std::string_view name = PyUnicode_AsUTF8(key.ptr());
    const auto at = static_cast<size_t>(
        std::find_if(params.begin(), params.end(), [&](const Parameter& p) { return p.name == name; }) -
        params.begin());
    if (at == params.size()) refuse(s, fmt::format("got an unexpected keyword argument '{}'", name));
    if (given[at]) refuse(s, fmt::format("got multiple values for argument '{}'", name));
    values[at] = argument_from(s, params[at], at + 1, value), given[at] = 1;
  }
  for (size_t i = 0; i < params.size(); ++i) {
    if (given[i]) continue;
    if (!params[i].default_value)
      refuse(s, fmt::format("missing required argument '{}' (position {})", params[i].name, i + 1));
    values[i] = *params[i].default_value;
  }
  return values;
}

Tensor invoke(const OpInfo& op, py::handle self, const py::args& args, const py::kwargs& keywords) {
  Arguments arguments(*op.signature, arguments_from(*op.signature, self, args, keywords));
  ReleasedCall during;  // the GIL released, Ctrl-C stops it
  return op.invoke(arguments);
}

}  // namespace

void bind_signatures(py::module_& m) {
  py::object tensor_class = py::type::of<Tensor>();
  for (const OpInfo& op : registered_ops()) {
    if (!op.signature) continue;
    const std::string doc =
        fmt::format("{}\n\n{}\nderivative: {}\nshape: {}", op.schema, op.formula, op.derivative, op.shape_rule);
    const OpInfo* info = &op;  // the registry lives as long as the process
    m.def(
        op.name.c_str(),
        [info](const py::args& args, const py::kwargs& keywords) { return invoke(*info, {}, args, keywords); },
        doc.c_str());
    // The method: the tensor is the first argument (torch's Tensor.<op>).
    if (op.signature->parameters.front().type != ArgumentType::tensor) continue;  // cat, stack
    py::setattr(tensor_class, op.name.c_str(),
                py::cpp_function([info](py::handle self, const py::args& args,
                                        const py::kwargs& keywords) { return invoke(*info, self, args, keywords); },
                                 py::name(op.name.c_str()), py::is_method(tensor_class), py::doc(doc.c_str())));
  }
}

}  // namespace loom::python
