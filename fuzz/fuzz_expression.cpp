// libFuzzer: any text as `loom graph --expr` (tools/expression.cpp). A loom::Error is
// the only allowed failure, however deep or long the input; an accepted expression
// is differentiated as loom graph does.
#include <string>

#include "../tools/expression.h"
#include "loom/ops.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const std::string text(reinterpret_cast<const char*>(data), size);
    loom::tools::ParsedExpression parsed = loom::tools::evaluate_expression(text, {{"w", {3, 3}}}, 1);
    if (parsed.value.requires_grad()) loom::sum(parsed.value).backward();
  } catch (const loom::Error&) {
  }
  return 0;
}
