#pragma once
// Module: a layer that owns named parameters and child modules, like PyTorch's
// nn.Module. Names are hierarchical and stable ("encoder.layers.0.self_attn.w_q.weight"):
// checkpoints and optimizers key on them.
//
// A module registers its members in its constructor:
//   weight = register_parameter("weight", xavier_uniform({out, in}, gen));
//   register_module("w_q", w_q);
// The registry points at the members, so a Module is neither copied nor moved
// (hold layers in std::vector<std::unique_ptr<...>>).
#include <string>
#include <utility>
#include <vector>

#include "loom/tensor.h"

namespace loom::nn {

class Module {
 public:
  Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;
  virtual ~Module() = default;

  /// Every parameter of this module and its descendants, in registration order,
  /// depth first, each tensor once (a parameter shared by two layers is listed
  /// under its first name).
  std::vector<std::pair<std::string, Tensor>> named_parameters() const;
  std::vector<Tensor> parameters() const;
  int64_t parameter_count() const;  // elements, not tensors
  /// The child modules, with their dotted names relative to this one.
  std::vector<std::pair<std::string, const Module*>> named_children() const;

  /// Training mode (dropout on) for this module and all below it.
  void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }

  /// Drops every parameter's .grad (the next backward starts from zero).
  void zero_grad();

  /// Moves every parameter and buffer of this module and its descendants to
  /// `device` (copies; a parameter shared by two layers stays shared). Build a
  /// model, then move it, then make its optimizer.
  void to(Device device);

 protected:
  /// Registers `value` as a trainable parameter named `name` and returns it
  /// (requires_grad set), to be stored in the member the registry points at.
  Tensor& register_parameter(const std::string& name, Tensor& member, Tensor value);
  /// Registers `value` as non-trainable state (e.g. the positional-encoding
  /// table) that to(device) moves with the parameters.
  Tensor& register_buffer(const std::string& name, Tensor& member, Tensor value);
  template <typename M>
  M& register_module(const std::string& name, M& child) {
    add_child(name, &child);
    return child;
  }

 private:
  void check_new_name(const std::string& name) const;
  void add_child(const std::string& name, Module* child);
  void collect(const std::string& prefix, std::vector<std::pair<std::string, Tensor>>& out,
               std::vector<const TensorImpl*>& seen) const;

  void collect_members(std::vector<Tensor*>& out);  // parameters and buffers, all levels

  std::vector<std::pair<std::string, Tensor*>> parameters_;
  std::vector<std::pair<std::string, Tensor*>> buffers_;
  std::vector<std::pair<std::string, Module*>> children_;
  bool training_ = true;
};

/// Eval mode (no dropout) for a scope, as inference wants: the modules that were
/// training go back to training mode at its end, also when an error leaves early.
/// Modules already in eval mode are never written, so threads that each hold a guard
/// over one shared model (loom translate's workers) do not race on its mode.
class EvalModeGuard {
 public:
  template <typename M>
  explicit EvalModeGuard(const std::vector<M*>& modules) {
    for (M* module : modules) enter(module);
  }
  explicit EvalModeGuard(Module& module) { enter(&module); }
  ~EvalModeGuard() {
    for (Module* module : were_training_) module->train();
  }
  EvalModeGuard(const EvalModeGuard&) = delete;
  EvalModeGuard& operator=(const EvalModeGuard&) = delete;

 private:
  void enter(Module* module) {
    if (!module->is_training()) return;
    module->eval();
    were_training_.push_back(module);
  }
  std::vector<Module*> were_training_;
};

}  // namespace loom::nn
