#include "expression.h"

#include <fmt/core.h>

#include <cctype>

#include "loom/ops.h"

namespace loom::tools {

namespace {

const std::map<std::string, Tensor (*)(const Tensor&)>& unary_functions() {
  static const std::map<std::string, Tensor (*)(const Tensor&)> table = {
      {"tanh", [](const Tensor& x) { return tanh(x); }},
      {"exp", [](const Tensor& x) { return exp(x); }},
      {"log", [](const Tensor& x) { return log(x); }},
      {"sqrt", [](const Tensor& x) { return sqrt(x); }},
      {"rsqrt", [](const Tensor& x) { return rsqrt(x); }},
      {"relu", [](const Tensor& x) { return relu(x); }},
      {"sigmoid", [](const Tensor& x) { return sigmoid(x); }},
      {"gelu", [](const Tensor& x) { return gelu(x); }},
      {"abs", [](const Tensor& x) { return abs(x); }},
      {"neg", [](const Tensor& x) { return neg(x); }},
      {"sum", [](const Tensor& x) { return sum(x); }},
      {"mean", [](const Tensor& x) { return mean(x); }},
      {"softmax", [](const Tensor& x) { return softmax(x, -1); }},
      {"log_softmax", [](const Tensor& x) { return log_softmax(x, -1); }},
      {"layer_norm", [](const Tensor& x) { return layer_norm(x, Tensor(), Tensor()); }},
      {"transpose", [](const Tensor& x) { return transpose(x, -2, -1); }},
  };
  return table;
}
const std::map<std::string, Tensor (*)(const Tensor&, const Tensor&)>& binary_functions() {
  static const std::map<std::string, Tensor (*)(const Tensor&, const Tensor&)> table = {
      {"maximum", [](const Tensor& a, const Tensor& b) { return maximum(a, b); }},
      {"minimum", [](const Tensor& a, const Tensor& b) { return minimum(a, b); }},
      {"matmul", [](const Tensor& a, const Tensor& b) { return matmul(a, b); }},
  };
  return table;
}

class ExpressionParser {
 public:
  ExpressionParser(std::string text, const std::map<std::string, Shape>& shapes, uint64_t seed)
      : text_(std::move(text)), shapes_(shapes), gen_(seed) {}

  Tensor parse() {
    Tensor result = expression();
    skip_space();
    if (pos_ != text_.size()) error(fmt::format("unexpected '{}'", text_[pos_]));
    return result;
  }
  const std::map<std::string, Tensor>& variables() const { return variables_; }

 private:
  [[noreturn]] void error(const std::string& what) const {
    fail("--expr \"{}\": {} at column {} (names are variables; numbers constants; + - * / @ ^, and {})", text_, what,
         pos_ + 1, function_names());
  }
  static std::string function_names() {
    std::string names;
    for (const auto& [name, fn] : unary_functions()) names += (names.empty() ? "" : ", ") + name + "(x)";
    for (const auto& [name, fn] : binary_functions()) names += ", " + name + "(a, b)";
    return names;
  }
  void skip_space() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  bool accept(char c) {
    skip_space();
    if (pos_ < text_.size() && text_[pos_] == c) return ++pos_, true;
    return false;
  }
  void expect(char c) {
    if (!accept(c)) error(fmt::format("expected '{}'", c));
  }
  // Bounds that keep a hostile --expr from overflowing the stack (the parser recurses
  // once per nesting level) or drawing a graph no one can read.
  static constexpr int kMaxDepth = 200;
  static constexpr int kMaxOperations = 1000;
  struct Nesting {
    explicit Nesting(ExpressionParser& p) : parser(p) {
      if (++parser.depth_ > kMaxDepth)
        fail(
            "--expr: nested deeper than {} levels (parentheses, functions, unary minus); loom graph draws small "
            "expressions",
            kMaxDepth);
    }
    ~Nesting() { --parser.depth_; }
    ExpressionParser& parser;
  };
  void count_operation() {
    if (++operations_ > kMaxOperations)
      fail(
          "--expr: more than {} operations; loom graph draws small expressions (a graph of that size is "
          "unreadable)",
          kMaxOperations);
  }
  // Shape errors from the ops (e.g. a matmul of [3] by [3]) name the expression too.
  template <typename F>
  Tensor apply(const char* what, F f) {
    count_operation();
    try {
      return f();
    } catch (const Error& e) {
      fail("--expr \"{}\": {} failed: {}", text_, what, e.what());
    }
  }
  Tensor expression() {
    Nesting nesting(*this);
    Tensor left = term();
    while (true) {
      if (accept('+')) {
        Tensor r = term();
        left = apply("+", [&] { return add(left, r); });
      } else if (accept('-')) {
        Tensor r = term();
        left = apply("-", [&] { return sub(left, r); });
      } else
        return left;
    }
  }
  Tensor term() {
    Tensor left = unary();
    while (true) {
      if (accept('*')) {
        Tensor r = unary();
        left = apply("*", [&] { return mul(left, r); });
      } else if (accept('/')) {
        Tensor r = unary();
        left = apply("/", [&] { return div(left, r); });
      } else if (accept('@')) {
        Tensor r = unary();
        left = apply("@", [&] { return matmul(left, r); });
      } else
        return left;
    }
  }
  Tensor unary() {
    Nesting nesting(*this);
    if (accept('-')) {
      Tensor x = unary();
      count_operation();
      return neg(x);
    }
    Tensor base = primary();
    if (accept('^')) {
      skip_space();
      double p = number();
      return apply("^", [&] { return pow(base, p); });
    }
    return base;
  }
  double number() {
    skip_space();
    size_t used = 0;
    double value = 0;
    try {
      value = std::stod(text_.substr(pos_), &used);
    } catch (const std::exception&) {
      error("expected a number");
    }
    pos_ += used;
    return value;
  }
  Tensor primary() {
    skip_space();
    if (pos_ >= text_.size()) error("unexpected end");
    char c = text_[pos_];
    if (accept('(')) {
      Tensor inner = expression();
      expect(')');
      return inner;
    }
    if (std::isdigit(static_cast<unsigned char>(c)) || c == '.') return scalar_tensor(number(), {DType::f64});
    if (!std::isalpha(static_cast<unsigned char>(c)) && c != '_') error(fmt::format("unexpected '{}'", c));
    size_t start = pos_;
    while (pos_ < text_.size() && (std::isalnum(static_cast<unsigned char>(text_[pos_])) || text_[pos_] == '_')) ++pos_;
    std::string name = text_.substr(start, pos_ - start);
    if (accept('(')) {
      Tensor a = expression();
      if (auto f = binary_functions().find(name); f != binary_functions().end()) {
        expect(',');
        Tensor b = expression();
        expect(')');
        return apply(name.c_str(), [&] { return f->second(a, b); });
      }
      expect(')');
      auto f = unary_functions().find(name);
      if (f == unary_functions().end()) error(fmt::format("no function '{}'", name));
      return apply(name.c_str(), [&] { return f->second(a); });
    }
    return variable(name);
  }
  Tensor variable(const std::string& name) {
    if (auto it = variables_.find(name); it != variables_.end()) return it->second;
    auto shape = shapes_.find(name);
    Tensor leaf = randn(shape == shapes_.end() ? Shape{3} : shape->second, {DType::f64}, gen_);
    leaf.requires_grad_();
    leaf.set_name(name);
    return variables_[name] = leaf;
  }

  std::string text_;
  std::map<std::string, Shape> shapes_;
  Generator gen_;
  size_t pos_ = 0;
  int depth_ = 0, operations_ = 0;
  std::map<std::string, Tensor> variables_;
};

}  // namespace

ParsedExpression evaluate_expression(const std::string& text, const std::map<std::string, Shape>& shapes,
                                     uint64_t seed) {
  ExpressionParser parser(text, shapes, seed);
  Tensor value = parser.parse();
  return {value, parser.variables()};
}

}  // namespace loom::tools
