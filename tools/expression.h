#pragma once
// `loom graph --expr`'s small expression language: tanh(x*w + b), sum(softmax(x @ w)),
// log(x)^2 ... Names are float64 leaves that require grad (shape from `shapes`, else
// [3]), numbers are constants; + - * / @ (matmul) ^ (a number power), unary minus,
// and functions (tanh, exp, log, sqrt, relu, sigmoid, gelu, sum, softmax, maximum, ...).
// Fuzzed by fuzz/fuzz_expression.cpp.
#include <cstdint>
#include <map>
#include <string>

#include "loom/tensor.h"

namespace loom::tools {

struct ParsedExpression {
  Tensor value;                             // the expression evaluated, its graph recorded
  std::map<std::string, Tensor> variables;  // the leaves, by name
};

// Parses and evaluates `text`. Any mistake, and nesting deeper than 200 levels or more
// than 1000 operations, is a loom::Error naming the expression.
ParsedExpression evaluate_expression(const std::string& text, const std::map<std::string, Shape>& shapes,
                                     uint64_t seed);

}  // namespace loom::tools
