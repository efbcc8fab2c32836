#pragma once
// Define-by-run reverse-mode autograd. Each op on tensors that require grad
// records a Node holding what its backward needs; backward() walks the nodes in
// reverse topological order (iteratively: no recursion, any depth).
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <source_location>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "loom/tensor.h"

namespace loom {

// ---- grad mode ----
bool grad_enabled();
/// Whether a backward pass (Tensor::backward or loom::grad) is running on this thread.
bool in_backward();
void set_grad_enabled(bool enabled);

/// Turns recording off in a scope (inference, optimizer updates).
class NoGradGuard {
 public:
  NoGradGuard() : previous_(grad_enabled()) { set_grad_enabled(false); }
  ~NoGradGuard() { set_grad_enabled(previous_); }
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};

class EnableGradGuard {
 public:
  EnableGradGuard() : previous_(grad_enabled()) { set_grad_enabled(true); }
  ~EnableGradGuard() { set_grad_enabled(previous_); }
  EnableGradGuard(const EnableGradGuard&) = delete;
  EnableGradGuard& operator=(const EnableGradGuard&) = delete;

 private:
  bool previous_;
};

// ---- anomaly mode ----
/// When on, every op checks its output (forward) and every backward its gradients
/// for NaN/Inf, and throws an Error naming the op and the user's source line.
bool anomaly_enabled();
void set_anomaly_enabled(bool enabled);
class AnomalyGuard {
 public:
  explicit AnomalyGuard(bool enabled = true) : previous_(anomaly_enabled()) { set_anomaly_enabled(enabled); }
  ~AnomalyGuard() { set_anomaly_enabled(previous_); }
  AnomalyGuard(const AnomalyGuard&) = delete;
  AnomalyGuard& operator=(const AnomalyGuard&) = delete;

 private:
  bool previous_;
};
/// A front end's own user line (Python's: the calling file and line), asked for in
/// anomaly mode only: anomaly errors then name it, not the binding's C++ line.
/// Null (the default): the C++ call sites alone.
using FrontendLine = std::string (*)();
void set_frontend_line(FrontendLine line);

/// The user's source line for the op being called. Public ops take a
/// `std::source_location where = std::source_location::current()` parameter and
/// open a CallSite; nested calls (a composite op calling primitives) keep the
/// outermost, i.e. the user's, line.
class CallSite {
 public:
  explicit CallSite(const std::source_location& where);
  ~CallSite();
  CallSite(const CallSite&) = delete;
  CallSite& operator=(const CallSite&) = delete;
  static std::source_location current();
  static bool active();  // whether an op call is under way on this thread

 private:
  bool outermost_;
};
using SourceLocation = std::source_location;

/// A name for the part of a model being built (e.g. "encoder.layers.0"): nodes
/// recorded inside get it (nested scopes join with '.'), and graph_dot draws each
/// scope as a cluster, or as a single box when the graph is large. One shared
/// string per scope, so recording costs a pointer copy.
class GraphScope {
 public:
  explicit GraphScope(std::string_view name);
  ~GraphScope();
  GraphScope(const GraphScope&) = delete;
  GraphScope& operator=(const GraphScope&) = delete;
  static std::shared_ptr<const std::string> current();

 private:
  std::shared_ptr<const std::string> previous_;
};

// ---- graph nodes ----
struct TensorMeta {
  Shape shape;
  DType dtype = DType::f32;
  Device device = kCPU;
};

class Node : public std::enable_shared_from_this<Node> {
 public:
  /// Destroys the graph behind this node iteratively: a 100,000-node chain must
  /// not overflow the stack through nested shared_ptr destructors.
  virtual ~Node();
  /// Gradients for each input (one per entry of `next`), given the gradient of the output.
  virtual std::vector<Tensor> apply(const Tensor& grad_output) = 0;
  /// Frees saved tensors after a backward pass without retain_graph.
  virtual void release() {}
  virtual bool is_accumulator() const { return false; }

  std::string name;
  std::vector<std::shared_ptr<Node>> next;  // null where that input needs no gradient
  std::vector<TensorMeta> inputs;           // shapes the gradients must have
  TensorMeta output;
  std::source_location where;                 // the user code that recorded this node
  std::shared_ptr<const std::string> scope;   // the GraphScope it was recorded in (null: none)
  std::string frontend_line;                  // anomaly mode with a front end (set_frontend_line): its user line
  uint64_t sequence = 0;                      // creation order: later nodes run first
  std::vector<TensorHook> hooks;              // hooks of the (non-leaf) output tensor
  std::weak_ptr<TensorImpl> retained_output;  // set by retain_grad()
};

/// Accumulates into a leaf's .grad.
class AccumulateGrad final : public Node {
 public:
  explicit AccumulateGrad(const std::shared_ptr<TensorImpl>& leaf);
  std::vector<Tensor> apply(const Tensor& grad_output) override;
  bool is_accumulator() const override { return true; }
  std::weak_ptr<TensorImpl> leaf;
};

/// What a backward formula sees: the op's output (reconstructed on demand so the
/// node does not own its own output: no reference cycle) and which inputs need grads.
class BackwardContext {
 public:
  BackwardContext(class FunctionNode& node) : node_(node) {}
  Tensor out() const;
  bool needs(size_t input) const;
  const Shape& input_shape(size_t input) const;

 private:
  FunctionNode& node_;
};

using BackwardFn = std::function<std::vector<Tensor>(BackwardContext&, const Tensor& grad)>;

class FunctionNode final : public Node {
 public:
  ~FunctionNode() override;
  std::vector<Tensor> apply(const Tensor& grad_output) override;
  void release() override;

  BackwardFn backward;
  std::shared_ptr<TensorImpl> saved_output;  // output metadata + storage, no grad_fn (when saved)
  bool saves_output = false;
  bool released = false;

  /// The storage versions of the inputs and the output when the op ran. A
  /// backward formula reads the tensors it captured; had one been written in
  /// place since (copy_/fill_ under NoGradGuard), the gradient would be silently
  /// wrong, so apply() refuses. Conservative: every input is checked, also one
  /// this op's formula does not read. Weak: a storage nobody holds is not kept alive.
  struct SavedVersion {
    std::weak_ptr<Storage> storage;
    uint64_t version = 0;
    int64_t input = -1;  // -1: the output
  };
  std::vector<SavedVersion> saved_versions;
};

/// Records `output = name(inputs...)` with its backward formula when grad mode is
/// on and an input requires grad; otherwise just returns output. The backward
/// lambda captures the inputs it needs by value, so a node keeps alive exactly
/// what its formula declares; it may ask the context for the output only when
/// recorded with SavedOutput::yes (the output's memory is then kept until backward).
enum class SavedOutput { no, yes };
Tensor record(std::string_view name, std::initializer_list<Tensor> inputs, Tensor output, BackwardFn backward,
              SavedOutput save_output = SavedOutput::no);
Tensor record(std::string_view name, const std::vector<Tensor>& inputs, Tensor output, BackwardFn backward,
              SavedOutput save_output = SavedOutput::no);

/// Gradient edge of a tensor: its grad_fn, or for a trainable leaf its AccumulateGrad.
std::shared_ptr<Node> gradient_edge(const Tensor& t);

// ---- running backward ----
/// d(outputs)/d(inputs), without touching .grad (like torch.autograd.grad).
/// grad_outputs may be empty for scalar outputs. Unused inputs give an undefined
/// tensor when allow_unused, an error otherwise.
std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs = {}, bool retain_graph = false,
                         bool create_graph = false, bool allow_unused = false);
/// The same with named options: grad({y}, {x}, {}, {.create_graph = true}).
struct GradOptions {
  bool retain_graph = false;  // keep the graph for another backward
  bool create_graph = false;  // record the backward itself (second derivatives); implies retain_graph
  bool allow_unused = false;  // an input the outputs do not depend on gets an undefined tensor, not an error
};
std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs, const GradOptions& options);

/// The engine's only arithmetic: summing two gradients (into new memory, or into
/// the first in place), and giving a leaf's .grad its own dense memory (a gradient
/// may arrive as a stride-0 expanded view). ops/ provides them (core stays below
/// ops); set once at load time.
using GradientAdder = Tensor (*)(const Tensor&, const Tensor&);
using GradientAdderInPlace = void (*)(const Tensor& into, const Tensor& g);  // into += g: same shape, dtype, device
using GradientDensifier = Tensor (*)(const Tensor&);
void set_gradient_functions(GradientAdder add, GradientAdderInPlace add_into, GradientDensifier contiguous);
Tensor add_gradients(const Tensor& a, const Tensor& b);
/// sum = sum + g, as add_gradients computes it (the same bits), in sum's own memory
/// when nothing else can see it: no graph to record (grad mode off), no other
/// handle on sum's tensor or storage (a hook's copy, a retained .grad, a view),
/// and the same shape, dtype and device as g. The backward engine sums the
/// gradients arriving at a node this way, without a new tensor per addition.
void accumulate_gradient(Tensor& sum, const Tensor& g);
Tensor dense_gradient(const Tensor& g);

/// Whether t has a NaN or Inf (anomaly mode), scanned by the "any_non_finite"
/// kernel of t's device (a float tensor of any strides).
using NonFiniteKernel = bool (*)(const Tensor&);
bool has_non_finite(const Tensor& t);

// ---- watching gradients flow (for graph pictures and study) ----
/// What went along one edge of the graph in a backward pass.
struct GradientFlow {
  double norm = 0;  // L2 norm
  bool all_zero = false;
  bool non_finite = false;  // a NaN or Inf in it
};

/// While a GradientTraceGuard holds it, a trace collects: every forward node whose
/// output has a NaN or Inf, and the first of them (the first NaN producer); for every
/// backward, the gradient norm along each edge (node, input) and into each root, and
/// the first node whose backward made a NaN/Inf out of a finite gradient. Norms are
/// computed on the host: for study, not for a training loop.
struct GradientTrace {
  std::unordered_map<const Node*, bool> forward_non_finite;
  const Node* first_nan_forward = nullptr;
  std::map<std::pair<const Node*, size_t>, GradientFlow> edges;
  std::unordered_map<const Node*, GradientFlow> roots;
  const Node* first_nan_backward = nullptr;
};
class GradientTraceGuard {
 public:
  explicit GradientTraceGuard(GradientTrace& trace);
  ~GradientTraceGuard();
  GradientTraceGuard(const GradientTraceGuard&) = delete;
  GradientTraceGuard& operator=(const GradientTraceGuard&) = delete;

 private:
  GradientTrace* previous_;
};
GradientFlow gradient_flow(const Tensor& g);

/// DOT text of the graph behind `root`, for Graphviz: the one producer of graph
/// pictures (`loom graph` renders it). Nodes: op, output shape, dtype, the source
/// line that recorded it; leaves blue; nodes in a GraphScope grouped by scope.
struct GraphDotOptions {
  const GradientTrace* trace = nullptr;  // edges labelled with gradient norms; zero/NaN highlighted
  /// Above this many nodes, each scope is drawn as one box (its op count and the
  /// gradient norms in and out of it) instead of a cluster of its nodes.
  size_t collapse_above = 300;
};
std::string graph_dot(const Tensor& root, const GraphDotOptions& options = {});

}  // namespace loom
