// The backward engine: discovers the graph from the outputs, counts each node's
// dependencies, runs backward closures in topological order, sums gradients
// arriving at a node, calls hooks, and (in capture mode, grad()) returns the
// gradients reaching the inputs. Anomaly mode names the op and source line of a
// backward that makes NaN/Inf.
#include <algorithm>
#include <queue>
#include <unordered_map>
#include <unordered_set>

#include "autograd_state.h"
#include "loom/autograd.h"
#include "loom/kernel_table.h"

namespace loom {

using detail::tls_backward_node, detail::tls_backward_passes, detail::tls_trace, detail::node_site;

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
            if (n && needed.count(n.get())) {
              is_needed = true;
              break;
            }
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
    if (slot.defined())
      accumulate_gradient(slot, grad);
    else
      slot = grad;
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
      if (auto retained = node->retained_output.lock()) {
        std::lock_guard lock(retained->grad_mutex.mutex);
        retained->grad = create_graph ? grad.impl_ptr() : grad.detach().impl_ptr();
      }
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
      LOOM_CHECK(grads.size() == node->next.size(), "{}: backward returned {} gradients for {} inputs", node->name,
                 grads.size(), node->next.size());
      if (tls_trace) trace(node, grad, grads);
      for (size_t i = 0; i < grads.size(); ++i) {
        Node* next = node->next[i].get();
        if (!next || !needed.count(next)) continue;
        const Tensor& g = grads[i];
        LOOM_CHECK(g.defined(), "{}: backward returned no gradient for input {}, which needs one", node->name, i);
        LOOM_CHECK(g.shape() == node->inputs[i].shape,
                   "{}: backward returned a gradient of shape {} for input {} of shape {}", node->name, g.shape(), i,
                   node->inputs[i].shape);
        if (anomaly_enabled() && has_non_finite(g))
          fail(
              "anomaly: the backward of {} produced NaN or Inf in the gradient of input {} (shape {}); "
              "the op was called from {}",
              node->name, i, g.shape(), node_site(*node));
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
  LOOM_CHECK(grad_outputs.empty() || grad_outputs.size() == outputs.size(), "grad: {} grad_outputs for {} outputs",
             grad_outputs.size(), outputs.size());
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
               "grad: seed gradient {} {} {} does not match output {} {} {}", seed.shape(), dtype_name(seed.dtype()),
               seed.device(), out.shape(), dtype_name(out.dtype()), out.device());
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

std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs, const GradOptions& options) {
  return grad(outputs, inputs, grad_outputs, options.retain_graph, options.create_graph, options.allow_unused);
}

}  // namespace loom
