// PyTorch-like printing: tensor([[1.0000, 2.0000], ...], dtype=float64, grad_fn=<mul>)
#include <cmath>
#include <string>

#include "loom/autograd.h"
#include "loom/tensor.h"

namespace loom {

namespace {

constexpr int64_t kEdgeItems = 3;     // shown at each end of a long dim
constexpr int64_t kThreshold = 1000;  // summarize tensors with more elements

struct Style {
  bool integer_values = true;  // floats that are all whole print as "2."
  bool scientific = false;
  int width = 1;
};

std::string format_value(double v, DType dtype, const Style& style) {
  if (dtype == DType::b8) return v != 0 ? "True" : "False";
  if (!is_floating(dtype)) return fmt::format("{}", static_cast<int64_t>(v));
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  if (style.scientific) return fmt::format("{:.4e}", v);
  if (style.integer_values) return fmt::format("{:.0f}.", v);
  return fmt::format("{:.4f}", v);
}

void format_dim(std::string& out, const std::vector<double>& values, const Shape& shape, int64_t dim, int64_t base,
                const Style& style, DType dtype, bool summarize, int indent) {
  int64_t n = shape[dim];
  int64_t inner = 1;
  for (size_t d = dim + 1; d < shape.size(); ++d) inner *= shape[d];
  out += '[';
  for (int64_t i = 0; i < n; ++i) {
    if (summarize && n > 2 * kEdgeItems && i == kEdgeItems) {
      out += dim + 1 == static_cast<int64_t>(shape.size()) ? "..., " : "...,\n" + std::string(indent + 1, ' ');
      i = n - kEdgeItems;
    }
    if (dim + 1 == static_cast<int64_t>(shape.size())) {
      out += fmt::format("{:>{}}", format_value(values[base + i], dtype, style), style.width);
    } else {
      format_dim(out, values, shape, dim + 1, base + i * inner, style, dtype, summarize, indent + 1);
    }
    if (i + 1 < n) {
      if (dim + 1 == static_cast<int64_t>(shape.size()))
        out += ", ";
      else
        out += "," + std::string(shape.size() - dim - 1, '\n') + std::string(indent + 1, ' ');
    }
  }
  out += ']';
}

}  // namespace

std::string format_tensor(const Tensor& t) {
  if (!t.defined()) return "tensor(undefined)";
  Tensor host = t.device().is_cpu() ? t : transfer(t, kCPU);
  std::vector<double> values = host.to_vector<double>();
  Style style;
  double max_abs = 0, min_abs = INFINITY;
  for (double v : values) {
    if (!std::isfinite(v)) continue;
    if (v != std::floor(v)) style.integer_values = false;
    max_abs = std::max(max_abs, std::abs(v));
    if (v != 0) min_abs = std::min(min_abs, std::abs(v));
  }
  if (is_floating(t.dtype()) && !style.integer_values && (max_abs >= 1e8 || min_abs < 1e-4)) style.scientific = true;
  for (double v : values)
    style.width = std::max<int>(style.width, static_cast<int>(format_value(v, t.dtype(), style).size()));
  bool summarize = t.numel() > kThreshold;

  std::string out = "tensor(";
  if (t.dim() == 0) {
    out += format_value(values[0], t.dtype(), style);
  } else {
    format_dim(out, values, t.shape(), 0, 0, style, t.dtype(), summarize, 7);
  }
  if (t.dtype() != DType::f32 && t.dtype() != DType::i64 && t.dtype() != DType::b8)
    out += fmt::format(", dtype={}", dtype_name(t.dtype()));
  if (!t.device().is_cpu()) out += fmt::format(", device='{}'", t.device());
  if (t.grad_fn())
    out += fmt::format(", grad_fn=<{}>", t.grad_fn()->name);
  else if (t.requires_grad())
    out += ", requires_grad=True";
  out += ')';
  if (summarize) out += fmt::format("  # shape {}", t.shape());
  return out;
}

std::string Tensor::str() const { return format_tensor(*this); }

}  // namespace loom
