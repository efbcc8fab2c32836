#pragma once
// An op's signature as PyTorch writes the function of the same name, e.g.
//   "amax(Tensor input, int[] dim=[], bool keepdim=False) -> Tensor"
// read once when the op registers: each argument's name, type and default. OpInfo::invoke
// calls the op with arguments by name (Arguments), and the Python module makes `loom.<op>`
// and `Tensor.<op>` from it: every argument by position or by name, each wrong one named.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "loom/tensor.h"

namespace loom {

// torch's argument types: Tensor, Tensor[], int, int[] (one int is taken for a list of
// one, as torch's dims), float, bool, str. A `?` after the type: None is allowed.
enum class ArgumentType { tensor, tensor_list, integer, integer_list, number, boolean, text };
std::string_view type_name(ArgumentType type);  // as the schema writes it: "int[]"

// One argument's value; std::monostate is None.
using ArgumentValue =
    std::variant<std::monostate, Tensor, std::vector<Tensor>, int64_t, std::vector<int64_t>, double, bool, std::string>;

struct Parameter {
  std::string name;
  ArgumentType type;
  bool optional = false;                       // `?`: None allowed
  bool keyword_only = false;                   // after a `*`
  std::optional<ArgumentValue> default_value;  // absent: the caller must give it
};

// Whether `value` may be given for `p` (None only where it is optional).
bool fits(const Parameter& p, const ArgumentValue& value);

// What an op's invoke returns: one tensor ("-> Tensor"), or several ("-> Tensor[]": chunk).
using OpResult = std::variant<Tensor, std::vector<Tensor>>;

struct OpSchema {
  static constexpr size_t kMaxParameters = 32;
  std::string text;  // as written
  std::string name;
  std::vector<Parameter> parameters;
  bool returns_list = false;  // "-> Tensor[]"
  // Every parameter a Tensor: the op's default call is its invoke.
  bool tensors_only() const;
  // Throws loom::Error naming the schema and what in it cannot be read.
  static OpSchema parse(std::string_view text);
  // The parameter called `name`, or null.
  const Parameter* find(std::string_view name) const;
};

// The arguments of one call, every parameter filled (given, or its default), read by
// name; a read of the wrong type or of an unknown name throws, naming both.
class Arguments {
 public:
  // values[i] is parameters[i]'s; checked against the types.
  Arguments(const OpSchema& schema, std::vector<ArgumentValue> values);
  const Tensor& tensor(std::string_view name) const;
  Tensor optional_tensor(std::string_view name) const;  // None: an undefined Tensor
  const std::vector<Tensor>& tensors(std::string_view name) const;
  int64_t integer(std::string_view name) const;
  std::optional<int64_t> optional_integer(std::string_view name) const;
  Shape integers(std::string_view name) const;  // None: {}
  double number(std::string_view name) const;
  std::optional<double> optional_number(std::string_view name) const;
  bool boolean(std::string_view name) const;
  const std::string& text(std::string_view name) const;
  bool is_none(std::string_view name) const;

 private:
  const ArgumentValue& value(std::string_view name) const;
  template <typename T>
  const T& read(std::string_view name) const;

  const OpSchema* schema_;
  std::vector<ArgumentValue> values_;
};

}  // namespace loom
