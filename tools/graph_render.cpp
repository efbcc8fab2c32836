// Graphviz does the layout and the drawing; loom only writes DOT (graph_dot).
#include "graph_render.h"

#include <graphviz/cgraph.h>
#include <graphviz/gvc.h>

#include <memory>

#include "loom/error.h"

namespace loom::tools {

void render_dot(const std::string& dot, const std::vector<std::pair<std::string, std::string>>& files) {
  std::unique_ptr<GVC_t, int (*)(GVC_t*)> context(gvContext(), gvFreeContext);
  LOOM_CHECK(context != nullptr, "graph: Graphviz could not start (gvContext failed)");
  std::unique_ptr<Agraph_t, int (*)(Agraph_t*)> graph(agmemread(dot.c_str()), agclose);
  LOOM_CHECK(graph != nullptr, "graph: Graphviz could not read the DOT text (a bug in graph_dot)");
  LOOM_CHECK(gvLayout(context.get(), graph.get(), "dot") == 0, "graph: Graphviz's dot layout failed");
  for (const auto& [format, path] : files) {
    if (gvRenderFilename(context.get(), graph.get(), format.c_str(), path.c_str()) == 0) continue;
    gvFreeLayout(context.get(), graph.get());
    fail("graph: Graphviz could not write {} as {} (is the folder writable, the format installed?)", path, format);
  }
  gvFreeLayout(context.get(), graph.get());
}

}  // namespace loom::tools
