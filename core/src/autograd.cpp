// Autograd's modes (grad, anomaly, call sites, scopes) and its graph: nodes, the
// edges record() draws, and their burial without deep recursion. The engine that
// runs backward is backward_engine.cpp; the DOT export is graph_dot.cpp.
#include "loom/autograd.h"

#include "autograd_state.h"
#include "loom/kernel_table.h"

#include <algorithm>
#include <atomic>
#include <optional>
#include <cmath>

namespace loom {

// ---- modes ----
namespace {
thread_local bool tls_grad_enabled = true;
std::atomic<bool> g_anomaly{false};
thread_local int tls_callsite_depth = 0;
thread_local std::source_location tls_callsite;
std::atomic<uint64_t> g_sequence{0};
thread_local std::shared_ptr<const std::string> tls_scope;
GradientAdder g_adder = nullptr;
GradientAdderInPlace g_adder_in_place = nullptr;
GradientDensifier g_densifier = nullptr;
std::atomic<FrontendLine> g_frontend_line{nullptr};

// The user's line of the op under way: the front end's, else the C++ call site.
std::string user_line() {
  if (FrontendLine line = g_frontend_line.load()) {
    std::string text = line();
    if (!text.empty()) return text;
  }
  return detail::where_text(CallSite::current());
}
}  // namespace

namespace detail {
thread_local const Node* tls_backward_node = nullptr;
thread_local int tls_backward_passes = 0;
thread_local GradientTrace* tls_trace = nullptr;

std::string where_text(const std::source_location& loc) {
  if (loc.line() == 0) return "an unknown location";
  return fmt::format("{}:{} ({})", loc.file_name(), loc.line(), loc.function_name());
}

std::string node_site(const Node& node) {
  return node.frontend_line.empty() ? where_text(node.where) : node.frontend_line;
}
}  // namespace detail
using detail::tls_backward_node, detail::tls_backward_passes, detail::tls_trace, detail::where_text, detail::node_site;

bool grad_enabled() { return tls_grad_enabled; }
bool in_backward() { return tls_backward_passes > 0; }
void set_grad_enabled(bool enabled) { tls_grad_enabled = enabled; }
bool anomaly_enabled() { return g_anomaly.load(std::memory_order_relaxed); }
void set_anomaly_enabled(bool enabled) { g_anomaly = enabled; }
void set_frontend_line(FrontendLine line) { g_frontend_line = line; }

CallSite::CallSite(const std::source_location& where) : outermost_(tls_callsite_depth == 0) {
  if (outermost_) tls_callsite = where;
  ++tls_callsite_depth;
}
CallSite::~CallSite() { --tls_callsite_depth; }
std::source_location CallSite::current() { return tls_callsite; }
bool CallSite::active() { return tls_callsite_depth > 0; }

GraphScope::GraphScope(std::string_view name) : previous_(tls_scope) {
  tls_scope =
      std::make_shared<const std::string>(previous_ ? fmt::format("{}.{}", *previous_, name) : std::string(name));
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

void set_gradient_functions(GradientAdder add, GradientAdderInPlace add_into, GradientDensifier contiguous) {
  g_adder = add;
  g_adder_in_place = add_into;
  g_densifier = contiguous;
}
Tensor add_gradients(const Tensor& a, const Tensor& b) {
  LOOM_CHECK(g_adder != nullptr, "autograd: no gradient functions registered (link loom_ops)");
  return g_adder(a, b);
}
void accumulate_gradient(Tensor& sum, const Tensor& g) {
  const auto& storage = sum.storage();
  const bool sole_owner = sum.impl_ptr().use_count() == 1 && storage.use_count() == 1 && sum.is_contiguous() &&
                          static_cast<size_t>(sum.numel()) * dtype_size(sum.dtype()) == storage->nbytes();
  if (sole_owner && !grad_enabled() && g_adder_in_place && sum.shape() == g.shape() && sum.dtype() == g.dtype() &&
      sum.device() == g.device())
    return g_adder_in_place(sum, g);
  sum = add_gradients(sum, g);
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
  // The read-add-write of .grad is one step: backward may run on several threads into one leaf.
  std::lock_guard lock(impl->grad_mutex.mutex);
  Tensor existing = impl->grad ? Tensor(impl->grad) : Tensor();
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
    fail(
        "{}: {} (shape {}) was modified in place after the forward pass used it (storage version {} now, {} "
        "then), so the gradients computed from it would be wrong; clone it before writing to it, or write "
        "after backward. The op was called from {}",
        name, saved.input < 0 ? std::string("its output") : fmt::format("input {}", saved.input), meta.shape,
        storage->version(), saved.version, node_site(*this));
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
  std::lock_guard lock(impl.grad_mutex.mutex);  // one accumulator per leaf, whichever thread records first
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
           tls_backward_node->name, name, output.shape(), node_site(*tls_backward_node));
    fail("anomaly: {} produced NaN or Inf in its forward output (shape {}), called from {}", name, output.shape(),
         user_line());
  }
  if (!grad_enabled()) return output;
  bool any =
      std::any_of(inputs.begin(), inputs.end(), [](const Tensor& t) { return t.defined() && t.requires_grad(); });
  if (!any) return output;
  auto node = std::make_shared<FunctionNode>();
  node->name = std::string(name);
  node->sequence = g_sequence++;
  node->where = CallSite::current();
  node->scope = tls_scope;
  if (anomaly_enabled())
    if (FrontendLine line = g_frontend_line.load()) node->frontend_line = line();
  node->backward = std::move(backward);
  for (const Tensor& in : inputs) {
    node->next.push_back(in.defined() ? gradient_edge(in) : nullptr);
    node->inputs.push_back(in.defined() ? TensorMeta{in.shape(), in.dtype(), in.device()} : TensorMeta{});
    if (in.defined() && in.storage())
      node->saved_versions.push_back(
          {in.storage(), in.storage()->version(), static_cast<int64_t>(node->inputs.size() - 1)});
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

}  // namespace loom
