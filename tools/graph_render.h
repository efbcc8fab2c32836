#pragma once
// DOT text to pictures through Graphviz's library (gvc: "dot" layout; cgraph).
#include <string>
#include <utility>
#include <vector>

namespace loom::tools {

// Lays `dot` out once and writes each (format, path): format "svg", "png", ...;
// a loom::Error names the file and what Graphviz refused. One layout for all the
// files also keeps Graphviz 2.42's pango plugin off freed memory: it remembers the
// last font name by pointer into the graph, so a second graph in the same process
// read a freed string (AddressSanitizer, heap-use-after-free in textspan_size).
void render_dot(const std::string& dot, const std::vector<std::pair<std::string, std::string>>& files);

}  // namespace loom::tools
