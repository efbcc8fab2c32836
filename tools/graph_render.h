#pragma once
// DOT text to pictures through Graphviz's library (gvc: "dot" layout; cgraph).
#include <string>

namespace loom::tools {

// Lays `dot` out and writes it as `format` ("svg", "png", ...) to `path`;
// a loom::Error names the file and what Graphviz refused.
void render_dot(const std::string& dot, const std::string& format, const std::string& path);

}  // namespace loom::tools
