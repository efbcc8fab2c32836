#include "loom/op_schema.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <utility>

#include "loom/error.h"

namespace loom {

namespace {

constexpr std::array<std::pair<std::string_view, ArgumentType>, 7> kTypes = {{{"Tensor", ArgumentType::tensor},
                                                                              {"Tensor[]", ArgumentType::tensor_list},
                                                                              {"int", ArgumentType::integer},
                                                                              {"int[]", ArgumentType::integer_list},
                                                                              {"float", ArgumentType::number},
                                                                              {"bool", ArgumentType::boolean},
                                                                              {"str", ArgumentType::text}}};

std::string_view trim(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return s;
}

// Splits at top-level commas (a default such as [0, 1] keeps its own).
std::vector<std::string_view> split_arguments(std::string_view s) {
  std::vector<std::string_view> parts;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '[') ++depth;
    if (s[i] == ']') --depth;
    if (s[i] == ',' && depth == 0) {
      parts.push_back(trim(s.substr(start, i - start)));
      start = i + 1;
    }
  }
  if (!trim(s.substr(start)).empty()) parts.push_back(trim(s.substr(start)));
  return parts;
}

template <typename T>
std::optional<T> number_from(std::string_view text) {
  T value{};
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

// A default as the schema writes it, for a parameter of `type`; nullopt where it cannot be read.
std::optional<ArgumentValue> default_from(std::string_view text, ArgumentType type) {
  if (text == "None") return ArgumentValue{};
  switch (type) {
    case ArgumentType::boolean:
      if (text == "True" || text == "False") return ArgumentValue{text == "True"};
      return std::nullopt;
    case ArgumentType::integer:
      if (auto v = number_from<int64_t>(text)) return ArgumentValue{*v};
      return std::nullopt;
    case ArgumentType::number:
      if (auto v = number_from<double>(text)) return ArgumentValue{*v};
      return std::nullopt;
    case ArgumentType::integer_list: {
      if (text.size() < 2 || text.front() != '[' || text.back() != ']') return std::nullopt;
      std::vector<int64_t> values;
      for (std::string_view part : split_arguments(text.substr(1, text.size() - 2))) {
        auto v = number_from<int64_t>(part);
        if (!v) return std::nullopt;
        values.push_back(*v);
      }
      return ArgumentValue{values};
    }
    case ArgumentType::text:
      if (text.size() >= 2 && text.front() == '\'' && text.back() == '\'')
        return ArgumentValue{std::string(text.substr(1, text.size() - 2))};
      return std::nullopt;
    case ArgumentType::tensor:
    case ArgumentType::tensor_list: return std::nullopt;  // only None
  }
  return std::nullopt;
}

bool holds_type(const ArgumentValue& v, ArgumentType type) {
  switch (type) {
    case ArgumentType::tensor: return std::holds_alternative<Tensor>(v);
    case ArgumentType::tensor_list: return std::holds_alternative<std::vector<Tensor>>(v);
    case ArgumentType::integer: return std::holds_alternative<int64_t>(v);
    case ArgumentType::integer_list: return std::holds_alternative<std::vector<int64_t>>(v);
    case ArgumentType::number: return std::holds_alternative<double>(v);
    case ArgumentType::boolean: return std::holds_alternative<bool>(v);
    case ArgumentType::text: return std::holds_alternative<std::string>(v);
  }
  return false;
}

}  // namespace

bool fits(const Parameter& p, const ArgumentValue& value) {
  return std::holds_alternative<std::monostate>(value) ? p.optional : holds_type(value, p.type);
}

std::string_view type_name(ArgumentType type) {
  for (const auto& [name, t] : kTypes)
    if (t == type) return name;
  return "?";
}

OpSchema OpSchema::parse(std::string_view text) {
  auto refuse = [&](std::string_view why) { fail("op schema '{}': {}", text, why); };
  const size_t open = text.find('('), close = text.rfind(')');
  if (open == std::string_view::npos || close == std::string_view::npos || close < open)
    refuse("no argument list in parentheses");
  const std::string_view returns = trim(text.substr(close + 1));
  if (returns != "-> Tensor" && returns != "-> Tensor[]") refuse("it must return '-> Tensor' or '-> Tensor[]'");
  OpSchema schema{std::string(text), std::string(trim(text.substr(0, open))), {}, returns == "-> Tensor[]"};
  if (schema.name.empty()) refuse("no name before the parentheses");
  bool keyword_only = false, defaults_began = false;
  for (std::string_view part : split_arguments(text.substr(open + 1, close - open - 1))) {
    if (part == "*") {
      keyword_only = true;
      continue;
    }
    const size_t space = part.find(' ');
    if (space == std::string_view::npos) refuse(fmt::format("'{}' is not 'type name'", part));
    std::string_view type_text = part.substr(0, space), rest = trim(part.substr(space + 1));
    Parameter p;
    p.keyword_only = keyword_only;
    if (type_text.ends_with('?')) {
      p.optional = true;
      type_text.remove_suffix(1);
    }
    // int[1] (torch: one int may stand for the list) reads as int[].
    std::string type(type_text);
    if (type.size() > 3 && type.starts_with("int[") && type.back() == ']') type = "int[]";
    const auto* known = std::find_if(kTypes.begin(), kTypes.end(), [&](const auto& t) { return t.first == type; });
    if (known == kTypes.end())
      refuse(fmt::format("unknown type '{}' (it knows Tensor, Tensor[], int, int[], float, bool, str)", type_text));
    p.type = known->second;
    if (const size_t equals = rest.find('='); equals != std::string_view::npos) {
      const std::string_view value = trim(rest.substr(equals + 1));
      p.default_value = default_from(value, p.type);
      if (!p.default_value) refuse(fmt::format("'{}' is not a default of type {}", value, type_text));
      if (std::holds_alternative<std::monostate>(*p.default_value) && !p.optional)
        refuse(fmt::format("argument '{}' defaults to None but its type has no '?'", trim(rest.substr(0, equals))));
      rest = trim(rest.substr(0, equals));
      defaults_began = true;
    } else if (defaults_began && !keyword_only) {
      refuse(fmt::format("argument '{}' without a default follows one with a default", rest));
    }
    p.name = std::string(rest);
    if (p.name.empty() || schema.find(p.name) != nullptr)
      refuse(fmt::format("argument name '{}' is empty or repeated", rest));
    schema.parameters.push_back(std::move(p));
  }
  if (schema.parameters.size() > kMaxParameters) refuse(fmt::format("more than {} arguments", kMaxParameters));
  return schema;
}

bool OpSchema::tensors_only() const {
  return std::all_of(parameters.begin(), parameters.end(),
                     [](const Parameter& p) { return p.type == ArgumentType::tensor && !p.optional; });
}

const Parameter* OpSchema::find(std::string_view name) const {
  for (const Parameter& p : parameters)
    if (p.name == name) return &p;
  return nullptr;
}

Arguments::Arguments(const OpSchema& schema, std::vector<ArgumentValue> values)
    : schema_(&schema), values_(std::move(values)) {
  LOOM_CHECK(values_.size() == schema.parameters.size(), "{}: {} argument values for {} parameters", schema.name,
             values_.size(), schema.parameters.size());
  for (size_t i = 0; i < values_.size(); ++i) {
    const Parameter& p = schema.parameters[i];
    LOOM_CHECK(fits(p, values_[i]), "{}: argument '{}' must be {}{}", schema.name, p.name, type_name(p.type),
               p.optional ? " or None" : "");
  }
}

const ArgumentValue& Arguments::value(std::string_view name) const {
  for (size_t i = 0; i < values_.size(); ++i)
    if (schema_->parameters[i].name == name) return values_[i];
  fail("{}: no argument named '{}' in {}", schema_->name, name, schema_->text);
}

template <typename T>
const T& Arguments::read(std::string_view name) const {
  const T* v = std::get_if<T>(&value(name));
  LOOM_CHECK(v != nullptr, "{}: argument '{}' read as another type than it holds ({})", schema_->name, name,
             schema_->text);
  return *v;
}

const Tensor& Arguments::tensor(std::string_view name) const { return read<Tensor>(name); }
Tensor Arguments::optional_tensor(std::string_view name) const { return is_none(name) ? Tensor() : tensor(name); }
const std::vector<Tensor>& Arguments::tensors(std::string_view name) const { return read<std::vector<Tensor>>(name); }
int64_t Arguments::integer(std::string_view name) const { return read<int64_t>(name); }
std::optional<int64_t> Arguments::optional_integer(std::string_view name) const {
  if (is_none(name)) return std::nullopt;
  return integer(name);
}
Shape Arguments::integers(std::string_view name) const {
  if (is_none(name)) return {};
  return read<std::vector<int64_t>>(name);
}
double Arguments::number(std::string_view name) const { return read<double>(name); }
std::optional<double> Arguments::optional_number(std::string_view name) const {
  if (is_none(name)) return std::nullopt;
  return number(name);
}
bool Arguments::boolean(std::string_view name) const { return read<bool>(name); }
const std::string& Arguments::text(std::string_view name) const { return read<std::string>(name); }
bool Arguments::is_none(std::string_view name) const { return std::holds_alternative<std::monostate>(value(name)); }

}  // namespace loom
