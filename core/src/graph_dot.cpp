// The autograd graph as Graphviz DOT (`loom graph`, Python's _repr_svg_): one box
// per op (or per collapsed scope), edges labelled with gradient norms after a
// traced backward, NaN/Inf in red, all-zero gradients dashed.
#include <cmath>
#include <map>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "loom/autograd.h"

namespace loom {

namespace {

// A DOT string literal's contents.
std::string dot_escape(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

std::string source_line(const std::source_location& where) {
  if (where.line() == 0) return "";
  std::string_view file = where.file_name();
  if (auto slash = file.rfind('/'); slash != std::string_view::npos) file.remove_prefix(slash + 1);
  return fmt::format("{}:{}", file, where.line());
}

std::string flow_label(const GradientFlow& f) {
  return f.non_finite ? "NaN/Inf" : f.all_zero ? "0 (all zero)" : fmt::format("{:.3g}", f.norm);
}
std::string flow_style(const GradientFlow& f) {
  if (f.non_finite) return ", color=red, fontcolor=red, penwidth=2";
  if (f.all_zero) return ", color=orange, fontcolor=darkorange, style=dashed";
  return "";
}

// Several edges between the same two boxes (a collapsed scope): the norm of all
// their gradients together.
GradientFlow combine(const GradientFlow& a, const GradientFlow& b) {
  return {std::sqrt(a.norm * a.norm + b.norm * b.norm), a.all_zero && b.all_zero, a.non_finite || b.non_finite};
}

// The graph behind one root, drawn in the steps of graph_dot.
class DotWriter {
 public:
  DotWriter(const Tensor& root, const GraphDotOptions& options)
      : root_(root), trace_(options.trace), root_node_(gradient_edge(root)) {
    collect_nodes();
    collapse_ = nodes_.size() > options.collapse_above;
    assign_scopes();
  }

  // Nodes: unscoped ones at the top level; a scope's as one cluster, or one box when collapsed.
  void write_nodes(std::string& out) {
    std::map<std::string, std::vector<const Node*>> by_scope;
    for (const Node* n : nodes_) by_scope[scope_of(n)].push_back(n);
    size_t cluster = 0;
    for (const auto& [scope, members] : by_scope) {
      if (scope.empty()) {
        for (const Node* n : members) out += "  " + node_line(n);
      } else if (collapse_) {
        bool has_nan = trace_ && std::any_of(members.begin(), members.end(), [&](const Node* n) {
                         return n == trace_->first_nan_forward || n == trace_->first_nan_backward;
                       });
        out += fmt::format("  \"scope {}\" [label=\"{}\\n{} ops\", shape=box3d, style=filled, fillcolor={}];\n",
                           dot_escape(scope), dot_escape(scope), members.size(), has_nan ? "red" : "lightgrey");
      } else {
        out += fmt::format("  subgraph cluster_{} {{\n    label=\"{}\"; style=rounded; color=grey;\n", cluster++,
                           dot_escape(scope));
        for (const Node* n : members) out += "    " + node_line(n);
        out += "  }\n";
      }
    }
  }

  // The output and the gradient seeded into it.
  void write_output(std::string& out) {
    std::string seed_label;
    if (trace_)
      if (auto it = trace_->roots.find(root_node_.get()); it != trace_->roots.end())
        seed_label = fmt::format(" [label=\"{}\"{}]", flow_label(it->second), flow_style(it->second));
    out += fmt::format("  out [label=\"{}\\n{} {}\", shape=ellipse];\n  out -> {}{};\n",
                       dot_escape(root_.name().empty() ? "output" : root_.name()), root_.shape(),
                       dtype_name(root_.dtype()), box(root_node_.get()), seed_label);
  }

  // Edges, from a node to each of its inputs (the way gradients flow), labelled
  // with the norm of what flowed; inside a collapsed scope, none; between boxes, combined.
  void write_edges(std::string& out) {
    std::map<std::pair<std::string, std::string>, std::optional<GradientFlow>> merged;
    std::vector<std::pair<std::string, std::string>> merged_order;
    for (const Node* n : nodes_) {
      for (size_t i = 0; i < n->next.size(); ++i) {
        std::string from = box(n);
        if (!n->next[i]) {
          if (collapse_ && !scope_of(n).empty()) continue;
          out += fmt::format("  c{}_{} [label=\"constant\\n{}\", shape=plaintext];\n  {} -> c{}_{} [style=dashed];\n",
                             ids_[n], i, n->inputs[i].shape, from, ids_[n], i);
          continue;
        }
        std::string to = box(n->next[i].get());
        if (from == to && collapse_) continue;
        std::optional<GradientFlow> flow;
        if (trace_)
          if (auto it = trace_->edges.find({n, i}); it != trace_->edges.end()) flow = it->second;
        if (!collapse_) {
          out += edge_line(from, to, flow);
          continue;
        }
        auto key = std::make_pair(from, to);
        auto [it, inserted] = merged.emplace(key, flow);
        if (inserted)
          merged_order.push_back(key);
        else if (it->second && flow)
          it->second = combine(*it->second, *flow);
        else
          it->second = std::nullopt;
      }
    }
    for (const auto& key : merged_order) out += edge_line(key.first, key.second, merged[key]);
  }

 private:
  // Every node behind the root, in discovery order (iterative: any depth).
  void collect_nodes() {
    std::vector<const Node*> stack = {root_node_.get()};
    ids_[root_node_.get()] = 0;
    nodes_.push_back(root_node_.get());
    while (!stack.empty()) {
      const Node* n = stack.back();
      stack.pop_back();
      for (const auto& next : n->next)
        if (next && ids_.emplace(next.get(), nodes_.size()).second) {
          nodes_.push_back(next.get());
          stack.push_back(next.get());
        }
    }
  }

  // A node's scope; a leaf (a layer's weight) belongs to the scope of its users when they share one.
  void assign_scopes() {
    for (const Node* n : nodes_)
      if (n->scope) scopes_[n] = *n->scope;
    std::unordered_map<const Node*, std::optional<std::string>> user_scope;
    for (const Node* n : nodes_)
      for (const auto& next : n->next) {
        if (!next || !next->is_accumulator()) continue;
        std::string scope = scopes_.count(n) ? scopes_[n] : "";
        auto [it, first] = user_scope.emplace(next.get(), scope);
        if (!first && it->second != scope) it->second = std::string();
      }
    for (const auto& [leaf, scope] : user_scope)
      if (scope && !scope->empty()) scopes_[leaf] = *scope;
  }

  std::string scope_of(const Node* n) const {
    auto it = scopes_.find(n);
    return it == scopes_.end() ? "" : it->second;
  }
  // Where a node is drawn: its own box, or (collapsed) its scope's box.
  std::string box(const Node* n) {
    std::string scope = scope_of(n);
    return collapse_ && !scope.empty() ? fmt::format("\"scope {}\"", dot_escape(scope)) : fmt::format("n{}", ids_[n]);
  }

  std::string node_line(const Node* n) {
    std::string label, style;
    if (n->is_accumulator()) {
      auto leaf = static_cast<const AccumulateGrad*>(n)->leaf.lock();
      std::string leaf_name = leaf && !leaf->name.empty() ? leaf->name : "leaf";
      label = fmt::format("{} (requires grad)\\n{} {}", dot_escape(leaf_name), n->output.shape,
                          dtype_name(n->output.dtype));
      bool bad_leaf = leaf && has_non_finite(Tensor(leaf).detach());
      style = bad_leaf ? ", style=filled, fillcolor=red, fontcolor=white" : ", style=filled, fillcolor=lightblue";
    } else {
      std::string where = source_line(n->where);
      label = fmt::format("{}\\n{} {}{}", dot_escape(n->name), n->output.shape, dtype_name(n->output.dtype),
                          where.empty() ? "" : "\\n" + dot_escape(where));
      if (trace_ && n == trace_->first_nan_forward) {
        label += "\\nfirst NaN/Inf (forward)";
        style = ", style=filled, fillcolor=red, fontcolor=white";
      } else if (trace_ && n == trace_->first_nan_backward) {
        label += "\\nfirst NaN/Inf (its backward)";
        style = ", style=filled, fillcolor=orange";
      } else if (trace_) {
        auto it = trace_->forward_non_finite.find(n);
        if (it != trace_->forward_non_finite.end() && it->second) style = ", color=red";
      }
    }
    return fmt::format("n{} [label=\"{}\"{}];\n", ids_[n], label, style);
  }

  static std::string edge_line(const std::string& from, const std::string& to,
                               const std::optional<GradientFlow>& flow) {
    return fmt::format("  {} -> {}{};\n", from, to,
                       flow ? fmt::format(" [label=\"{}\"{}]", flow_label(*flow), flow_style(*flow)) : "");
  }

  const Tensor& root_;
  const GradientTrace* trace_;
  std::shared_ptr<Node> root_node_;
  std::unordered_map<const Node*, size_t> ids_;
  std::vector<const Node*> nodes_;
  std::unordered_map<const Node*, std::string> scopes_;
  bool collapse_ = false;
};

}  // namespace

std::string graph_dot(const Tensor& root, const GraphDotOptions& options) {
  std::string out =
      "digraph loom {\n  rankdir=BT;\n  node [shape=box, fontname=\"monospace\", fontsize=10];\n"
      "  edge [fontname=\"monospace\", fontsize=9];\n";
  if (!root.requires_grad()) return out + "}\n";
  DotWriter dot(root, options);
  dot.write_nodes(out);
  dot.write_output(out);
  dot.write_edges(out);
  return out + "}\n";
}

}  // namespace loom
