#include "loom/autograd.h"

#include "loom/kernel_table.h"

#include <algorithm>
#include <atomic>
#include <optional>
#include <cmath>
#include <queue>
#include <unordered_map>
#include <unordered_set>

namespace loom {

// ---- modes ----
namespace {
thread_local bool tls_grad_enabled = true;
std::atomic<bool> g_anomaly{false};
thread_local int tls_callsite_depth = 0;
thread_local std::source_location tls_callsite;
thread_local const Node* tls_backward_node = nullptr;  // the node whose backward is running
thread_local int tls_backward_passes = 0;                // backward passes running on this thread
std::atomic<uint64_t> g_sequence{0};
thread_local std::shared_ptr<const std::string> tls_scope;
thread_local GradientTrace* tls_trace = nullptr;
GradientAdder g_adder = nullptr;
GradientDensifier g_densifier = nullptr;
}  // namespace

bool grad_enabled() { return tls_grad_enabled; }
bool in_backward() { return tls_backward_passes > 0; }
void set_grad_enabled(bool enabled) { tls_grad_enabled = enabled; }
bool anomaly_enabled() { return g_anomaly.load(std::memory_order_relaxed); }
void set_anomaly_enabled(bool enabled) { g_anomaly = enabled; }

CallSite::CallSite(const std::source_location& where) : outermost_(tls_callsite_depth == 0) {
  if (outermost_) tls_callsite = where;
  ++tls_callsite_depth;
}
CallSite::~CallSite() { --tls_callsite_depth; }
std::source_location CallSite::current() { return tls_callsite; }

GraphScope::GraphScope(std::string_view name) : previous_(tls_scope) {
  tls_scope = std::make_shared<const std::string>(previous_ ? fmt::format("{}.{}", *previous_, name) : std::string(name));
}
GraphScope::~GraphScope() { tls_scope = previous_; }
std::shared_ptr<const std::string> GraphScope::current() { return tls_scope; }

GradientTraceGuard::GradientTraceGuard(GradientTrace& trace) : previous_(tls_trace) { tls_trace = &trace; }
GradientTraceGuard::~GradientTraceGuard() { tls_trace = previous_; }

GradientFlow gradient_flow(const Tensor& g) {
  GradientFlow flow;
  if (!g.defined()) return flow;
  // core's own copy (Tensor::to is an op, a layer above): a gradient off the CPU is read from a host copy
  const Tensor host = g.device().is_cpu() ? g.detach() : transfer(g.detach(), kCPU);
  std::vector<double> values = host.to_vector<double>();
  double sum = 0;
  bool zero = true, non_finite = false;
  for (double v : values) {
    sum += v * v;
    zero = zero && v == 0;
    non_finite = non_finite || !std::isfinite(v);
  }
  return {std::sqrt(sum), zero, non_finite};
}

void set_gradient_functions(GradientAdder add, GradientDensifier contiguous) {
  g_adder = add;
  g_densifier = contiguous;
}
Tensor add_gradients(const Tensor& a, const Tensor& b) {
  LOOM_CHECK(g_adder != nullptr, "autograd: no gradient functions registered (link loom_ops)");
  return g_adder(a, b);
}
Tensor dense_gradient(const Tensor& g) {
  LOOM_CHECK(g_densifier != nullptr, "autograd: no gradient functions registered (link loom_ops)");
  return g_densifier(g);
}

bool has_non_finite(const Tensor& t) {
  if (!is_floating(t.dtype()) || t.numel() == 0) return false;
  // The scan runs on the tensor's own device, as a kernel (ops/cpu/any_non_finite.cpp).
  return find_kernel<NonFiniteKernel>("any_non_finite", t.device(), t.dtype())(t);
}

static std::string where_text(const std::source_location& loc) {
  if (loc.line() == 0) return "an unknown location";
  return fmt::format("{}:{} ({})", loc.file_name(), loc.line(), loc.function_name());
}

// ---- nodes ----
namespace {
// What dying nodes still own (edges, backward closures that capture tensors,
// saved outputs), released one at a time by the outermost destructor. A nested
// destructor only adds to the pile, so the stack depth stays constant.
struct Graveyard {
  std::vector<std::shared_ptr<Node>> nodes;
  std::vector<BackwardFn> closures;
  std::vector<std::shared_ptr<TensorImpl>> tensors;
  bool draining = false;
};
thread_local Graveyard tls_graveyard;

void bury(std::vector<std::shared_ptr<Node>>& next, BackwardFn* closure, std::shared_ptr<TensorImpl>* saved) {
  Graveyard& g = tls_graveyard;
  for (auto& n : next)
    if (n) g.nodes.push_back(std::move(n));
  next.clear();
  if (closure && *closure) g.closures.push_back(std::move(*closure));
  if (saved && *saved) g.tensors.push_back(std::move(*saved));
  if (g.draining) return;
  g.draining = true;
  while (!g.nodes.empty() || !g.closures.empty() || !g.tensors.empty()) {
    if (!g.closures.empty()) {
      BackwardFn dying = std::move(g.closures.back());
      g.closures.pop_back();
    } else if (!g.tensors.empty()) {
      std::shared_ptr<TensorImpl> dying = std::move(g.tensors.back());
      g.tensors.pop_back();
    } else {
      std::shared_ptr<Node> dying = std::move(g.nodes.back());
      g.nodes.pop_back();
    }
  }
  g.draining = false;
}
}  // namespace

Node::~Node() { bury(next, nullptr, nullptr); }
FunctionNode::~FunctionNode() { bury(next, &backward, &saved_output); }

AccumulateGrad::AccumulateGrad(const std::shared_ptr<TensorImpl>& leaf_impl) : leaf(leaf_impl) {
  name = "AccumulateGrad";
}

std::vector<Tensor> AccumulateGrad::apply(const Tensor& grad_output) {
  auto impl = leaf.lock();
  if (!impl) return {};
  Tensor leaf_tensor(impl);
  Tensor existing = leaf_tensor.grad();
  if (!existing.defined()) {
    // .grad gets dense memory of its own, since an optimizer updates it in place:
    // the incoming gradient is stolen only when nothing else can see it
    // (add's backward hands the same tensor to both inputs, expand gives stride 0).
    const auto& storage = grad_output.storage();
    bool sole_owner = grad_output.impl_ptr().use_count() == 1 && storage.use_count() == 1 &&
                      grad_output.is_contiguous() &&
                      static_cast<size_t>(grad_output.numel()) * dtype_size(grad_output.dtype()) == storage->nbytes();
    Tensor g = sole_owner ? grad_output : dense_gradient(grad_output);
    impl->grad = grad_enabled() ? g.impl_ptr() : g.detach().impl_ptr();
  } else {
    Tensor sum = add_gradients(existing, grad_output);
    impl->grad = sum.impl_ptr();
  }
  return {};
}

Tensor BackwardContext::out() const {
  LOOM_CHECK(node_.saves_output,
             "{}: its backward reads the op's output, but record() was not told to save it (SavedOutput::yes)",
             node_.name);
  LOOM_CHECK(node_.saved_output != nullptr,
             "{}: backward needs the output, which was freed by an earlier backward; pass "
             "retain_graph=true to the first backward",
             node_.name);
  auto impl = std::make_shared<TensorImpl>(*node_.saved_output);
  impl->grad_fn = node_.shared_from_this();
  return Tensor(std::move(impl));
}

bool BackwardContext::needs(size_t input) const { return node_.next.at(input) != nullptr; }
const Shape& BackwardContext::input_shape(size_t input) const { return node_.inputs.at(input).shape; }

std::vector<Tensor> FunctionNode::apply(const Tensor& grad_output) {
  LOOM_CHECK(!released,
             "{}: trying to backward through the graph a second time (its saved tensors were freed); "
             "pass retain_graph=true to the first backward",
             name);
  for (const SavedVersion& saved : saved_versions) {
    auto storage = saved.storage.lock();
    if (!storage || storage->version() == saved.version) continue;
    const TensorMeta& meta = saved.input < 0 ? output : inputs[saved.input];
    fail("{}: {} (shape {}) was modified in place after the forward pass used it (storage version {} now, {} "
         "then), so the gradients computed from it would be wrong; clone it before writing to it, or write "
         "after backward. The op was called from {}",
         name, saved.input < 0 ? std::string("its output") : fmt::format("input {}", saved.input), meta.shape,
         storage->version(), saved.version, where_text(where));
  }
  BackwardContext ctx(*this);
  return backward(ctx, grad_output);
}

void FunctionNode::release() {
  backward = nullptr;
  saved_output.reset();
  released = true;
}

std::shared_ptr<Node> gradient_edge(const Tensor& t) {
  if (!t.requires_grad()) return nullptr;
  if (t.grad_fn()) return t.grad_fn();
  auto& impl = t.impl();
  if (auto existing = impl.grad_accumulator.lock()) return existing;
  auto acc = std::make_shared<AccumulateGrad>(t.impl_ptr());
  acc->sequence = g_sequence++;
  acc->output = {t.shape(), t.dtype(), t.device()};
  acc->name = "AccumulateGrad";
  impl.grad_accumulator = acc;
  return acc;
}

Tensor record(std::string_view name, const std::vector<Tensor>& inputs, Tensor output, BackwardFn backward,
              SavedOutput save_output) {
  if (anomaly_enabled() && has_non_finite(output)) {
    if (tls_backward_node)
      fail("anomaly: the backward of {} produced NaN or Inf (in its {} step, shape {}); the op was called from {}",
           tls_backward_node->name, name, output.shape(), where_text(tls_backward_node->where));
    fail("anomaly: {} produced NaN or Inf in its forward output (shape {}), called from {}", name, output.shape(),
         where_text(CallSite::current()));
  }
  if (!grad_enabled()) return output;
  bool any = std::any_of(inputs.begin(), inputs.end(), [](const Tensor& t) { return t.defined() && t.requires_grad(); });
  if (!any) return output;
  auto node = std::make_shared<FunctionNode>();
  node->name = std::string(name);
  node->sequence = g_sequence++;
  node->where = CallSite::current();
  node->scope = tls_scope;
  node->backward = std::move(backward);
  for (const Tensor& in : inputs) {
    node->next.push_back(in.defined() ? gradient_edge(in) : nullptr);
    node->inputs.push_back(in.defined() ? TensorMeta{in.shape(), in.dtype(), in.device()} : TensorMeta{});
    if (in.defined() && in.storage())
      node->saved_versions.push_back({in.storage(), in.storage()->version(), static_cast<int64_t>(node->inputs.size() - 1)});
  }
  node->output = {output.shape(), output.dtype(), output.device()};
  // Only a backward that reads the output keeps its memory alive until backward.
  node->saves_output = save_output == SavedOutput::yes;
  if (node->saves_output) {
    if (output.storage()) node->saved_versions.push_back({output.storage(), output.storage()->version(), -1});
    // The saved copy shares storage and metadata but not grad_fn: no cycle.
    node->saved_output = std::make_shared<TensorImpl>(output.impl());
    node->saved_output->grad_fn = nullptr;
    node->saved_output->grad = nullptr;
    node->saved_output->hooks.clear();
  }
  if (tls_trace) {
    bool non_finite = has_non_finite(output);
    tls_trace->forward_non_finite[node.get()] = non_finite;
    if (non_finite && !tls_trace->first_nan_forward) tls_trace->first_nan_forward = node.get();
  }
  output.impl().grad_fn = node;
  output.impl().requires_grad = false;
  return output;
}

Tensor record(std::string_view name, std::initializer_list<Tensor> inputs, Tensor output, BackwardFn backward,
              SavedOutput save_output) {
  return record(name, std::vector<Tensor>(inputs), std::move(output), std::move(backward), save_output);
}

// ---- the engine ----
namespace {

Tensor run_hooks(const std::vector<TensorHook>& hooks, Tensor grad) {
  for (const auto& hook : hooks) {
    Tensor replaced = hook(grad);
    if (replaced.defined()) grad = replaced;
  }
  return grad;
}

struct Engine {
  bool create_graph = false;
  bool retain_graph = false;
  // Capture mode (grad()): targets are nodes whose incoming gradient we return.
  std::unordered_map<Node*, size_t> targets;
  std::vector<Tensor> captured;

  std::unordered_map<Node*, int> dependencies;
  std::unordered_set<Node*> needed;
  std::unordered_map<Node*, Tensor> buffers;

  void collect(const std::vector<std::shared_ptr<Node>>& roots) {
    // Iterative post-order DFS: discovers the graph and, in capture mode, which
    // nodes lie on a path to a target (only those are worth running).
    std::unordered_set<Node*> seen;
    std::vector<std::pair<Node*, size_t>> stack;
    for (const auto& root : roots) {
      if (!root || !seen.insert(root.get()).second) continue;
      stack.push_back({root.get(), 0});
      while (!stack.empty()) {
        auto& [node, child] = stack.back();
        if (child < node->next.size()) {
          Node* next = node->next[child++].get();
          if (next && seen.insert(next).second) stack.push_back({next, 0});
          continue;
        }
        bool is_needed = targets.empty() ? true : targets.count(node) > 0;
        if (!is_needed)
          for (const auto& n : node->next)
            if (n && needed.count(n.get())) { is_needed = true; break; }
        if (is_needed) needed.insert(node);
        stack.pop_back();
      }
    }
    for (Node* node : needed)
      for (const auto& n : node->next)
        if (n && needed.count(n.get())) dependencies[n.get()]++;
  }

  void accumulate(Node* node, const Tensor& grad) {
    auto& slot = buffers[node];
    slot = slot.defined() ? add_gradients(slot, grad) : grad;
  }

  void run(const std::vector<std::shared_ptr<Node>>& roots, const std::vector<Tensor>& seeds) {
    struct Pass {  // in_backward() while this pass runs, gradient sums included
      Pass() { ++tls_backward_passes; }
      ~Pass() { --tls_backward_passes; }
    } pass;
    collect(roots);
    for (size_t i = 0; i < roots.size(); ++i)
      if (roots[i] && needed.count(roots[i].get())) {
        accumulate(roots[i].get(), seeds[i]);
        if (tls_trace) tls_trace->roots[roots[i].get()] = gradient_flow(seeds[i]);
      }
    auto later_first = [](Node* a, Node* b) { return a->sequence < b->sequence; };
    std::priority_queue<Node*, std::vector<Node*>, decltype(later_first)> ready(later_first);
    std::unordered_set<Node*> queued;
    for (const auto& root : roots)
      if (root && needed.count(root.get()) && dependencies[root.get()] == 0 && queued.insert(root.get()).second)
        ready.push(root.get());

    while (!ready.empty()) {
      Node* node = ready.top();
      ready.pop();
      Tensor grad = buffers[node];
      buffers.erase(node);
      grad = run_hooks(node->hooks, grad);
      if (auto* acc = dynamic_cast<AccumulateGrad*>(node)) {
        if (auto impl = acc->leaf.lock()) grad = run_hooks(impl->hooks, grad);
      }
      if (auto retained = node->retained_output.lock())
        retained->grad = create_graph ? grad.impl_ptr() : grad.detach().impl_ptr();
      auto target = targets.find(node);
      if (target != targets.end()) captured[target->second] = grad;
      if (node->is_accumulator()) {
        if (targets.empty()) node->apply(grad);
        continue;
      }
      if (target != targets.end() && !has_needed_child(node)) continue;

      std::vector<Tensor> grads;
      {
        const Node* outer = tls_backward_node;
        tls_backward_node = node;
        try {
          grads = node->apply(grad);
        } catch (...) {
          tls_backward_node = outer;
          throw;
        }
        tls_backward_node = outer;
      }
      LOOM_CHECK(grads.size() == node->next.size(), "{}: backward returned {} gradients for {} inputs",
                 node->name, grads.size(), node->next.size());
      if (tls_trace) trace(node, grad, grads);
      for (size_t i = 0; i < grads.size(); ++i) {
        Node* next = node->next[i].get();
        if (!next || !needed.count(next)) continue;
        const Tensor& g = grads[i];
        LOOM_CHECK(g.defined(), "{}: backward returned no gradient for input {}, which needs one", node->name, i);
        LOOM_CHECK(g.shape() == node->inputs[i].shape,
                   "{}: backward returned a gradient of shape {} for input {} of shape {}", node->name,
                   g.shape(), i, node->inputs[i].shape);
        if (anomaly_enabled() && has_non_finite(g))
          fail("anomaly: the backward of {} produced NaN or Inf in the gradient of input {} (shape {}); "
               "the op was called from {}",
               node->name, i, g.shape(), where_text(node->where));
        accumulate(next, g);
        if (--dependencies[next] == 0 && queued.insert(next).second) ready.push(next);
      }
      if (!retain_graph) node->release();
    }
  }

  // Records what flowed along each of node's edges, and whether its backward
  // made the first NaN/Inf from a finite incoming gradient.
  static void trace(const Node* node, const Tensor& incoming, const std::vector<Tensor>& grads) {
    bool made_non_finite = false;
    for (size_t i = 0; i < grads.size(); ++i) {
      if (!grads[i].defined() || !node->next[i]) continue;
      GradientFlow flow = gradient_flow(grads[i]);
      tls_trace->edges[{node, i}] = flow;
      made_non_finite = made_non_finite || flow.non_finite;
    }
    if (made_non_finite && !tls_trace->first_nan_backward && !gradient_flow(incoming).non_finite)
      tls_trace->first_nan_backward = node;
  }

  bool has_needed_child(Node* node) const {
    for (const auto& n : node->next)
      if (n && needed.count(n.get())) return true;
    return false;
  }
};

}  // namespace

std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs, bool retain_graph, bool create_graph,
                         bool allow_unused) {
  LOOM_CHECK(grad_outputs.empty() || grad_outputs.size() == outputs.size(),
             "grad: {} grad_outputs for {} outputs", grad_outputs.size(), outputs.size());
  Engine engine;
  engine.create_graph = create_graph;
  engine.retain_graph = retain_graph || create_graph;
  std::vector<std::shared_ptr<Node>> roots;
  std::vector<Tensor> seeds;
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Tensor& out = outputs[i];
    LOOM_CHECK(out.requires_grad(), "grad: output {} does not require grad", i);
    Tensor seed = grad_outputs.empty() ? Tensor() : grad_outputs[i];
    if (!seed.defined()) {
      LOOM_CHECK(out.numel() == 1, "grad: output {} has shape {}; a non-scalar output needs a grad_output", i,
                 out.shape());
      // The engine owns no arithmetic; build the 1 through ops' adder-free path.
      seed = Tensor::empty(out.shape(), {out.dtype(), out.device()});
      device_fill(seed, 1.0);
    }
    LOOM_CHECK(seed.shape() == out.shape() && seed.dtype() == out.dtype() && seed.device() == out.device(),
               "grad: seed gradient {} {} {} does not match output {} {} {}", seed.shape(),
               dtype_name(seed.dtype()), seed.device(), out.shape(), dtype_name(out.dtype()), out.device());
    roots.push_back(gradient_edge(out));
    seeds.push_back(seed);
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    LOOM_CHECK(inputs[i].requires_grad(), "grad: input {} does not require grad", i);
    engine.targets[gradient_edge(inputs[i]).get()] = i;
  }
  engine.captured.resize(inputs.size());

  if (create_graph) {
    EnableGradGuard guard;
    engine.run(roots, seeds);
  } else {
    NoGradGuard guard;
    engine.run(roots, seeds);
  }
  for (size_t i = 0; i < inputs.size(); ++i)
    LOOM_CHECK(allow_unused || engine.captured[i].defined(),
               "grad: input {} (shape {}) was not used to compute the outputs; pass allow_unused=true", i,
               inputs[i].shape());
  return engine.captured;
}

// ---- graph export ----
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

}  // namespace

std::string graph_dot(const Tensor& root, const GraphDotOptions& options) {
  std::string out = "digraph loom {\n  rankdir=BT;\n  node [shape=box, fontname=\"monospace\", fontsize=10];\n"
                    "  edge [fontname=\"monospace\", fontsize=9];\n";
  if (!root.requires_grad()) return out + "}\n";
  const GradientTrace* trace = options.trace;

  // Every node behind root, in discovery order (iterative: any depth).
  auto root_node = gradient_edge(root);
  std::unordered_map<const Node*, size_t> ids;
  std::vector<const Node*> nodes;
  std::vector<const Node*> stack = {root_node.get()};
  ids[root_node.get()] = 0;
  nodes.push_back(root_node.get());
  while (!stack.empty()) {
    const Node* n = stack.back();
    stack.pop_back();
    for (const auto& next : n->next)
      if (next && ids.emplace(next.get(), nodes.size()).second) {
        nodes.push_back(next.get());
        stack.push_back(next.get());
      }
  }
  const bool collapse = nodes.size() > options.collapse_above;

  // A node's scope; a leaf (a layer's weight) belongs to the scope of its users when they share one.
  std::unordered_map<const Node*, std::string> scopes;
  for (const Node* n : nodes)
    if (n->scope) scopes[n] = *n->scope;
  std::unordered_map<const Node*, std::optional<std::string>> user_scope;
  for (const Node* n : nodes)
    for (const auto& next : n->next) {
      if (!next || !next->is_accumulator()) continue;
      std::string scope = scopes.count(n) ? scopes[n] : "";
      auto [it, first] = user_scope.emplace(next.get(), scope);
      if (!first && it->second != scope) it->second = std::string();
    }
  for (const auto& [leaf, scope] : user_scope)
    if (scope && !scope->empty()) scopes[leaf] = *scope;

  // Where a node is drawn: its own box, or (collapsed) its scope's box.
  auto scope_of = [&](const Node* n) -> std::string {
    auto it = scopes.find(n);
    return it == scopes.end() ? "" : it->second;
  };
  auto box = [&](const Node* n) {
    std::string scope = scope_of(n);
    return collapse && !scope.empty() ? fmt::format("\"scope {}\"", dot_escape(scope)) : fmt::format("n{}", ids[n]);
  };

  auto node_line = [&](const Node* n) {
    std::string label, style;
    if (n->is_accumulator()) {
      auto leaf = static_cast<const AccumulateGrad*>(n)->leaf.lock();
      std::string leaf_name = leaf && !leaf->name.empty() ? leaf->name : "leaf";
      label = fmt::format("{} (requires grad)\\n{} {}", dot_escape(leaf_name), n->output.shape, dtype_name(n->output.dtype));
      bool bad_leaf = leaf && has_non_finite(Tensor(leaf).detach());
      style = bad_leaf ? ", style=filled, fillcolor=red, fontcolor=white" : ", style=filled, fillcolor=lightblue";
    } else {
      std::string where = source_line(n->where);
      label = fmt::format("{}\\n{} {}{}", dot_escape(n->name), n->output.shape, dtype_name(n->output.dtype),
                          where.empty() ? "" : "\\n" + dot_escape(where));
      if (trace && n == trace->first_nan_forward) {
        label += "\\nfirst NaN/Inf (forward)";
        style = ", style=filled, fillcolor=red, fontcolor=white";
      } else if (trace && n == trace->first_nan_backward) {
        label += "\\nfirst NaN/Inf (its backward)";
        style = ", style=filled, fillcolor=orange";
      } else if (trace) {
        auto it = trace->forward_non_finite.find(n);
        if (it != trace->forward_non_finite.end() && it->second) style = ", color=red";
      }
    }
    return fmt::format("n{} [label=\"{}\"{}];\n", ids[n], label, style);
  };

  // Nodes: unscoped ones at the top level; a scope's as one cluster, or one box when collapsed.
  std::map<std::string, std::vector<const Node*>> by_scope;
  for (const Node* n : nodes) by_scope[scope_of(n)].push_back(n);
  size_t cluster = 0;
  for (const auto& [scope, members] : by_scope) {
    if (scope.empty()) {
      for (const Node* n : members) out += "  " + node_line(n);
    } else if (collapse) {
      bool has_nan = trace && std::any_of(members.begin(), members.end(), [&](const Node* n) {
                       return n == trace->first_nan_forward || n == trace->first_nan_backward;
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

  // The output and the gradient seeded into it.
  std::string seed_label;
  if (trace)
    if (auto it = trace->roots.find(root_node.get()); it != trace->roots.end())
      seed_label = fmt::format(" [label=\"{}\"{}]", flow_label(it->second), flow_style(it->second));
  out += fmt::format("  out [label=\"{}\\n{} {}\", shape=ellipse];\n  out -> {}{};\n",
                     dot_escape(root.name().empty() ? "output" : root.name()), root.shape(), dtype_name(root.dtype()),
                     box(root_node.get()), seed_label);

  // Edges, from a node to each of its inputs (the way gradients flow), labelled
  // with the norm of what flowed; inside a collapsed scope, none; between boxes, combined.
  std::map<std::pair<std::string, std::string>, std::optional<GradientFlow>> merged;
  std::vector<std::pair<std::string, std::string>> merged_order;
  for (const Node* n : nodes) {
    for (size_t i = 0; i < n->next.size(); ++i) {
      std::string from = box(n);
      if (!n->next[i]) {
        if (collapse && !scope_of(n).empty()) continue;
        out += fmt::format("  c{}_{} [label=\"constant\\n{}\", shape=plaintext];\n  {} -> c{}_{} [style=dashed];\n",
                           ids[n], i, n->inputs[i].shape, from, ids[n], i);
        continue;
      }
      std::string to = box(n->next[i].get());
      if (from == to && collapse) continue;
      std::optional<GradientFlow> flow;
      if (trace)
        if (auto it = trace->edges.find({n, i}); it != trace->edges.end()) flow = it->second;
      if (!collapse) {
        out += fmt::format("  {} -> {}{};\n", from, to,
                           flow ? fmt::format(" [label=\"{}\"{}]", flow_label(*flow), flow_style(*flow)) : "");
        continue;
      }
      auto key = std::make_pair(from, to);
      auto [it, inserted] = merged.emplace(key, flow);
      if (inserted) merged_order.push_back(key);
      else if (it->second && flow) it->second = combine(*it->second, *flow);
      else it->second = std::nullopt;
    }
  }
  for (const auto& key : merged_order) {
    const auto& flow = merged[key];
    out += fmt::format("  {} -> {}{};\n", key.first, key.second,
                       flow ? fmt::format(" [label=\"{}\"{}]", flow_label(*flow), flow_style(*flow)) : "");
  }
  return out + "}\n";
}

std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs, const GradOptions& options) {
  return grad(outputs, inputs, grad_outputs, options.retain_graph, options.create_graph, options.allow_unused);
}

}  // namespace loom
