#include "loom/nn/module.h"

#include <algorithm>
#include <map>

#include "loom/autograd.h"
#include "loom/error.h"
#include "loom/ops.h"

namespace loom::nn {

void Module::check_new_name(const std::string& name) const {
  LOOM_CHECK(!name.empty(), "Module: a parameter or child needs a non-empty name");
  auto taken = [&](const auto& list) {
    return std::any_of(list.begin(), list.end(), [&](const auto& entry) { return entry.first == name; });
  };
  LOOM_CHECK(!taken(parameters_) && !taken(buffers_) && !taken(children_), "Module: the name '{}' is registered twice",
             name);
}

Tensor& Module::register_parameter(const std::string& name, Tensor& member, Tensor value) {
  check_new_name(name);
  LOOM_CHECK(value.defined(), "Module: parameter '{}' is an undefined tensor", name);
  LOOM_CHECK(value.is_leaf(), "Module: parameter '{}' must be a leaf tensor (detach it first)", name);
  value.requires_grad_();
  member = std::move(value);
  parameters_.emplace_back(name, &member);
  return member;
}

Tensor& Module::register_buffer(const std::string& name, Tensor& member, Tensor value) {
  check_new_name(name);
  LOOM_CHECK(value.defined(), "Module: buffer '{}' is an undefined tensor", name);
  member = std::move(value);
  buffers_.emplace_back(name, &member);
  return member;
}

void Module::add_child(const std::string& name, Module* child) {
  check_new_name(name);
  LOOM_CHECK(child != this, "Module: '{}' cannot be its own child", name);
  children_.emplace_back(name, child);
}

void Module::collect(const std::string& prefix, std::vector<std::pair<std::string, Tensor>>& out,
                     std::vector<const TensorImpl*>& seen) const {
  for (const auto& [name, tensor] : parameters_) {
    if (!tensor->defined()) continue;
    const TensorImpl* impl = tensor->impl_ptr().get();
    if (std::find(seen.begin(), seen.end(), impl) != seen.end()) continue;
    seen.push_back(impl);
    out.emplace_back(prefix + name, *tensor);
  }
  for (const auto& [name, child] : children_) child->collect(prefix + name + ".", out, seen);
}

std::vector<std::pair<std::string, Tensor>> Module::named_parameters() const {
  std::vector<std::pair<std::string, Tensor>> out;
  std::vector<const TensorImpl*> seen;
  collect("", out, seen);
  return out;
}

std::vector<Tensor> Module::parameters() const {
  std::vector<Tensor> out;
  for (auto& [name, tensor] : named_parameters()) out.push_back(tensor);
  return out;
}

int64_t Module::parameter_count() const {
  int64_t count = 0;
  for (const Tensor& p : parameters()) count += p.numel();
  return count;
}

std::vector<std::pair<std::string, const Module*>> Module::named_children() const {
  std::vector<std::pair<std::string, const Module*>> out;
  for (const auto& [name, child] : children_) out.emplace_back(name, child);
  return out;
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [name, child] : children_) child->train(on);
}

void Module::zero_grad() {
  for (Tensor& p : parameters()) p.set_grad(Tensor());
}

void Module::collect_members(std::vector<Tensor*>& out) {
  for (auto& [name, tensor] : parameters_) out.push_back(tensor);
  for (auto& [name, tensor] : buffers_) out.push_back(tensor);
  for (auto& [name, child] : children_) child->collect_members(out);
}

void Module::to(Device device) {
  NoGradGuard no_grad;
  std::vector<Tensor*> members;
  collect_members(members);
  // One copy per storage handle: members that shared a tensor share its copy.
  std::map<const TensorImpl*, Tensor> moved;
  for (Tensor* member : members) {
    if (!member->defined() || member->device() == device) continue;
    auto [it, fresh] = moved.try_emplace(member->impl_ptr().get());
    if (fresh) {
      it->second = member->detach().to(device);
      if (member->requires_grad()) it->second.requires_grad_();
    }
    *member = it->second;
  }
}

}  // namespace loom::nn
