// Checkpoint averaging (loom/nn/checkpoint.h): the paper's last-5 / last-20
// recipe, built on the checked safetensors reader and the durable writer.
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>

#include "loom/error.h"
#include "loom/nn/checkpoint.h"

namespace loom::nn {

namespace {

using json = nlohmann::json;

// Metadata that decides what the tensors mean: averaging across a difference
// here gives a model nobody trained.
const char* const kMustAgree[] = {"config", "vocabulary"};

// "field 'd_model' is 256 here but 512 in 'a'" when both configs are JSON
// objects; otherwise the whole values.
std::string config_difference(const std::string& here, const std::string& first, const std::string& first_path) {
  json a = json::parse(here, nullptr, false), b = json::parse(first, nullptr, false);
  if (a.is_object() && b.is_object()) {
    for (const auto& [key, value] : b.items())
      if (!a.contains(key) || a[key] != value)
        return fmt::format("field '{}' is {} here but {} in '{}'", key, a.contains(key) ? a[key].dump() : "absent",
                           value.dump(), first_path);
    for (const auto& [key, value] : a.items())
      if (!b.contains(key))
        return fmt::format("field '{}' is {} here but absent in '{}'", key, value.dump(), first_path);
  }
  return fmt::format("'{}' here but '{}' in '{}'", here, first, first_path);
}

}  // namespace

Metadata average_checkpoints(const std::vector<std::string>& paths, const std::string& out_path) {
  LOOM_CHECK(paths.size() >= 2, "average: needs at least two checkpoints, got {}", paths.size());
  const std::string& first_path = paths.front();
  TensorFile first = load_safetensors(first_path);
  Metadata metadata = first.metadata;
  // One float64 sum per floating tensor, in the first file's order.
  std::vector<std::vector<double>> sums(first.tensors.size());
  // A NaN or Inf weight (a diverged run's checkpoint) would spread into the average: refused by name.
  auto accumulate = [&](const NamedTensors& tensors, const std::string& path) {
    for (size_t i = 0; i < tensors.size(); ++i) {
      const Tensor& t = tensors[i].second;
      if (!is_floating(t.dtype())) continue;
      auto& sum = sums[i];
      sum.resize(static_cast<size_t>(t.numel()), 0.0);
      auto add = [&](const auto* x) {
        for (size_t j = 0; j < sum.size(); ++j) {
          LOOM_CHECK(std::isfinite(static_cast<double>(x[j])),
                     "average: '{}': tensor '{}' holds {} at element {} (a diverged run?); not averaged", path,
                     tensors[i].first, static_cast<double>(x[j]), j);
          sum[j] += x[j];
        }
      };
      if (t.dtype() == DType::f32)
        add(t.data<float>());
      else
        add(t.data<double>());
    }
  };
  accumulate(first.tensors, first_path);

  for (size_t f = 1; f < paths.size(); ++f) {
    const std::string& path = paths[f];
    TensorFile file = load_safetensors(path);
    for (const char* key : kMustAgree) {
      const bool here = file.metadata.count(key), there = first.metadata.count(key);
      LOOM_CHECK(here == there, "average: '{}' {} metadata '{}' but '{}' {}", path, here ? "has" : "lacks", key,
                 first_path, there ? "has it" : "does not");
      if (here && file.metadata.at(key) != first.metadata.at(key))
        fail("average: '{}' has another '{}' than '{}': {}", path, key, first_path,
             config_difference(file.metadata.at(key), first.metadata.at(key), first_path));
    }
    // Keep only what every input agrees on: step, epoch and val_loss drop out.
    for (auto it = metadata.begin(); it != metadata.end();) {
      auto other = file.metadata.find(it->first);
      it = other != file.metadata.end() && other->second == it->second ? std::next(it) : metadata.erase(it);
    }
    // Same names in the same order: both files were written from one model's
    // parameter list. Otherwise find what is missing to name it.
    std::map<std::string, size_t> index;
    for (size_t i = 0; i < file.tensors.size(); ++i) index[file.tensors[i].first] = i;
    NamedTensors ordered;
    for (const auto& [name, ref] : first.tensors) {
      auto it = index.find(name);
      LOOM_CHECK(it != index.end(), "average: '{}' has no tensor '{}' ({} {} in '{}')", path, name,
                 dtype_name(ref.dtype()), ref.shape(), first_path);
      const Tensor& t = file.tensors[it->second].second;
      LOOM_CHECK(t.dtype() == ref.dtype() && t.shape() == ref.shape(),
                 "average: '{}': tensor '{}' is {} {} but {} {} in '{}'", path, name, dtype_name(t.dtype()), t.shape(),
                 dtype_name(ref.dtype()), ref.shape(), first_path);
      LOOM_CHECK(is_floating(t.dtype()) || std::memcmp(t.raw_data(), ref.raw_data(),
                                                       static_cast<size_t>(t.numel()) * dtype_size(t.dtype())) == 0,
                 "average: '{}': integer tensor '{}' differs from '{}' (only floating tensors are averaged)", path,
                 name, first_path);
      ordered.emplace_back(name, t);
      index.erase(it);
    }
    LOOM_CHECK(index.empty(), "average: '{}' has a tensor '{}' that '{}' lacks", path,
               index.empty() ? "" : index.begin()->first, first_path);
    accumulate(ordered, path);
  }

  const double n = static_cast<double>(paths.size());
  NamedTensors averaged;
  for (size_t i = 0; i < first.tensors.size(); ++i) {
    const auto& [name, ref] = first.tensors[i];
    if (!is_floating(ref.dtype())) {
      averaged.emplace_back(name, ref);
      continue;
    }
    Tensor t = Tensor::empty(ref.shape(), {ref.dtype()});
    const auto& sum = sums[i];
    if (t.dtype() == DType::f32) {
      float* y = t.data<float>();
      for (size_t j = 0; j < sum.size(); ++j) y[j] = static_cast<float>(sum[j] / n);
    } else {
      double* y = t.data<double>();
      for (size_t j = 0; j < sum.size(); ++j) y[j] = sum[j] / n;
    }
    averaged.emplace_back(name, t);
  }
  metadata["averaged_from"] = json(paths).dump();
  save_safetensors(out_path, averaged, metadata);
  return metadata;
}

}  // namespace loom::nn
