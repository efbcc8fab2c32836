// Graphviz does the layout and the drawing; loom only writes DOT (graph_dot).
#include "graph_render.h"

#include <graphviz/cgraph.h>
#include <graphviz/gvc.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "loom/error.h"

namespace loom::tools {

namespace {

// A tensor used by many ops far apart (x in x+x+...+x) gives edges across many ranks,
// which dot lays out as chains of virtual nodes, n(n-1)/2 of them for n uses; its
// network simplex and crossing minimization then grow faster still (100 uses ran
// for minutes, 3,000 reached 23 GB). Up to this many (x+x+...+x of 40 terms: 780),
// a graph draws in a few seconds.
constexpr int64_t kMaxVirtualNodes = 800;

// The virtual nodes dot adds: with nodes ranked by their longest path from a source,
// an edge spanning k ranks becomes k - 1 of them.
int64_t long_edge_virtual_nodes(Agraph_t* graph) {
  std::unordered_map<Agnode_t*, int64_t> rank, pending;  // pending: in-edges not yet ranked
  std::vector<Agnode_t*> ready;
  for (Agnode_t* n = agfstnode(graph); n; n = agnxtnode(graph, n)) {
    int64_t in = 0;
    for (Agedge_t* e = agfstin(graph, n); e; e = agnxtin(graph, e)) ++in;
    pending[n] = in;
    rank[n] = 0;
    if (in == 0) ready.push_back(n);
  }
  while (!ready.empty()) {  // Kahn's order: each node's rank is final when it is taken
    Agnode_t* n = ready.back();
    ready.pop_back();
    for (Agedge_t* e = agfstout(graph, n); e; e = agnxtout(graph, e)) {
      Agnode_t* head = aghead(e);
      rank[head] = std::max(rank[head], rank[n] + 1);
      if (--pending[head] == 0) ready.push_back(head);
    }
  }
  int64_t virtual_nodes = 0;
  for (Agnode_t* n = agfstnode(graph); n; n = agnxtnode(graph, n))
    for (Agedge_t* e = agfstout(graph, n); e; e = agnxtout(graph, e))
      virtual_nodes += std::max<int64_t>(rank[aghead(e)] - rank[n] - 1, 0);
  return virtual_nodes;
}

}  // namespace

void render_dot(const std::string& dot, const std::vector<std::pair<std::string, std::string>>& files) {
  std::unique_ptr<GVC_t, int (*)(GVC_t*)> context(gvContext(), gvFreeContext);
  LOOM_CHECK(context != nullptr, "graph: Graphviz could not start (gvContext failed)");
  std::unique_ptr<Agraph_t, int (*)(Agraph_t*)> graph(agmemread(dot.c_str()), agclose);
  LOOM_CHECK(graph != nullptr, "graph: Graphviz could not read the DOT text (a bug in graph_dot)");
  const int64_t virtual_nodes = long_edge_virtual_nodes(graph.get());
  LOOM_CHECK(virtual_nodes <= kMaxVirtualNodes,
             "graph: too wide to lay out: its edges span {} ranks beyond their neighbours (a tensor used by many ops "
             "far apart, as x in x+x+...+x); Graphviz's layout grows faster than that number squared, so loom draws "
             "graphs up to {}",
             virtual_nodes, kMaxVirtualNodes);
  LOOM_CHECK(gvLayout(context.get(), graph.get(), "dot") == 0, "graph: Graphviz's dot layout failed");
  for (const auto& [format, path] : files) {
    if (gvRenderFilename(context.get(), graph.get(), format.c_str(), path.c_str()) == 0) continue;
    gvFreeLayout(context.get(), graph.get());
    fail("graph: Graphviz could not write {} as {} (is the folder writable, the format installed?)", path, format);
  }
  gvFreeLayout(context.get(), graph.get());
}

}  // namespace loom::tools
