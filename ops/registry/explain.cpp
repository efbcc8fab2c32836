// `loom explain`: an op's registration (formulas, shape rule, samples) shown as a
// learner reads it, with gradcheck's Jacobians (ops/registry/gradcheck.cpp) printed.
#include "loom/explain.h"

#include <algorithm>
#include <numeric>

#include "loom/ops.h"

namespace loom {

size_t smallest_sample(const OpInfo& op) {
  LOOM_CHECK(!op.samples.empty(), "{}: has no registered samples", op.name);
  size_t best = 0;
  int64_t best_entries = -1;
  for (size_t s = 0; s < op.samples.size(); ++s) {
    int64_t in = 0;
    for (const InputSpec& spec : op.samples[s].inputs)
      if (is_floating(spec.dtype) && spec.differentiable) in += shape_numel(spec.shape);
    // The output size needs a run; the inputs' size orders the samples well enough.
    int64_t entries = std::max<int64_t>(in, 1);
    if (best_entries < 0 || entries < best_entries) best = s, best_entries = entries;
  }
  return best;
}

Explanation explain(const OpInfo& op, size_t sample_index) {
  LOOM_CHECK(sample_index < op.samples.size(), "explain {}: no sample {} (it has {}, numbered from 0)", op.name,
             sample_index, op.samples.size());
  Explanation e;
  e.op = &op;
  e.sample = sample_index;
  e.sample_label = sample_label(op, sample_index);
  e.inputs = sample_leaves(op, sample_index);
  MultiFn fn = sample_function(op, sample_index);
  e.output = fn(e.inputs).at(0).detach();
  if (op.differentiable) {
    e.first = jacobian_check(fn, e.inputs);
    if (op.gradgrad) e.second = gradgrad_jacobian_check(fn, e.inputs);
  }
  return e;
}

namespace {

std::string matrices_side_by_side(const JacobianCheck& j, size_t block, int64_t first_column,
                                  const ExplainFormat& format) {
  const int64_t rows = static_cast<int64_t>(j.analytic.size());
  const int64_t cols = j.columns[block].count;
  const int64_t shown_rows = std::min(rows, format.max_rows), shown_cols = std::min(cols, format.max_cols);
  std::string out;
  const int width = 9;
  const std::string gap = "   |   ";
  std::string header = fmt::format("{:>6}  {:<{}}", "", "analytic (backward)", shown_cols * width);
  out += header + gap + "numeric (central differences)\n";
  double block_error = 0;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      block_error = std::max(block_error, std::abs(j.analytic[r][first_column + c] - j.numeric[r][first_column + c]));
  for (int64_t r = 0; r < shown_rows; ++r) {
    std::string left, right;
    for (int64_t c = 0; c < shown_cols; ++c) {
      left += fmt::format("{:>{}.4f}", j.analytic[r][first_column + c], width);
      right += fmt::format("{:>{}.4f}", j.numeric[r][first_column + c], width);
    }
    out += fmt::format("{:>6}  {}{}{}\n", fmt::format("y[{}]", r), left, gap, right);
  }
  if (shown_rows < rows || shown_cols < cols)
    out += fmt::format("        (showing {} of {} rows, {} of {} columns; all {} entries are compared)\n", shown_rows,
                       rows, shown_cols, cols, rows * cols);
  out += fmt::format("        max |analytic - numeric| in this block: {:.3e}\n", block_error);
  return out;
}

std::string verdict(const CheckResult& r) {
  GradcheckOptions tol;
  return fmt::format("max abs error {:.3e}, max rel error {:.3e}: {} (|analytic - numeric| <= {:g} + {:g}*|numeric|){}",
                     r.max_abs_error, r.max_rel_error, r.passed ? "pass" : "FAIL", tol.atol, tol.rtol,
                     r.passed ? "" : "\n  first failure: " + r.message);
}

}  // namespace

std::string format_explanation(const Explanation& e, const ExplainFormat& format) {
  const OpInfo& op = *e.op;
  std::string out;
  out += fmt::format("{}\n\n", op.name);
  if (!op.schema.empty()) out += fmt::format("  signature   {}  (torch's; loom.{} takes it)\n", op.schema, op.name);
  out += fmt::format("  forward     {}\n", op.formula);
  out += fmt::format("  derivative  {}\n", op.derivative);
  out += fmt::format("  shape       {}\n", op.shape_rule);
  out += "  (g = dL/dy, the gradient arriving at the output; v = what arrives at a backward op's own output)\n";
  if (!op.note.empty()) out += fmt::format("  note        {}\n", op.note);
  out += fmt::format("\nsamples ({}):\n", op.samples.size());
  for (size_t s = 0; s < op.samples.size(); ++s)
    out += fmt::format("  {}{} {}\n", s == e.sample ? "*" : " ", s, sample_label(op, s));
  out += fmt::format("\nsample {} ({}), float64:\n", e.sample, e.sample_label);
  for (size_t i = 0; i < e.inputs.size(); ++i)
    out += fmt::format("input {} {} {}{}:\n{}\n", i, e.inputs[i].shape(), dtype_name(e.inputs[i].dtype()),
                       e.inputs[i].requires_grad() ? " (differentiated)" : "", e.inputs[i].detach());
  out += fmt::format("output {} {}:\n{}\n", e.output.shape(), dtype_name(e.output.dtype()), e.output);
  if (!e.first) {
    out += "\nnot differentiable: the matrix checks its forward only (fast vs reference kernels, strided inputs)\n";
    return out;
  }
  const JacobianCheck& j = *e.first;
  GradcheckOptions tol;
  out += fmt::format(
      "\nJacobian dy/dinput: row r = output element r (flat), column c = input element c; numeric = "
      "(f(x + {:g}) - f(x - {:g})) / {:g}\n",
      tol.eps, tol.eps, 2 * tol.eps);
  int64_t first_column = 0;
  for (size_t b = 0; b < j.columns.size(); ++b) {
    out += fmt::format("\ndy / d input {}:\n", j.columns[b].input);
    out += matrices_side_by_side(j, b, first_column, format);
    first_column += j.columns[b].count;
  }
  out += "\ngradcheck: " + verdict(j.result) + "\n";
  if (e.second) {
    const JacobianCheck& s = *e.second;
    int64_t cols = 0;
    for (const auto& c : s.columns) cols += c.count;
    out += fmt::format(
        "\nsecond derivative (gradgradcheck): the backward pass (inputs, v) -> d(sum(y*v))/dinputs, "
        "v a fixed random cotangent, checked the same way: {} x {} Jacobian\n",
        s.analytic.size(), cols);
    out += "gradgradcheck: " + verdict(s.result) + "\n";
  } else if (!op.note.empty()) {
    out += fmt::format("\nno second-derivative check ({})\n", op.note);
  } else {
    out += "\nno second-derivative check for this op\n";
  }
  return out;
}

namespace {
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  std::iota(row.begin(), row.end(), 0);
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t k = 1; k <= b.size(); ++k) {
      size_t above = row[k];
      row[k] = std::min({row[k] + 1, row[k - 1] + 1, diagonal + (a[i - 1] == b[k - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}
}  // namespace

std::vector<std::string> similar_op_names(const std::string& name, size_t limit) {
  std::vector<std::pair<size_t, std::string>> scored;
  for (const OpInfo& op : registered_ops()) {
    size_t d = edit_distance(name, op.name);
    bool contains =
        !name.empty() && (op.name.find(name) != std::string::npos || name.find(op.name) != std::string::npos);
    // Ordered by distance; a name that contains the other (or is contained) is near whatever its distance.
    if (contains || d <= std::max<size_t>(2, name.size() / 3)) scored.push_back({d, op.name});
  }
  std::sort(scored.begin(), scored.end());
  std::vector<std::string> names;
  for (size_t i = 0; i < scored.size() && i < limit; ++i) names.push_back(scored[i].second);
  return names;
}

const OpInfo& op_or_error(const std::string& name) {
  if (const OpInfo* op = find_op(name)) return *op;
  std::vector<std::string> near = similar_op_names(name);
  std::string list;
  for (const auto& n : near) list += (list.empty() ? "" : ", ") + n;
  fail("no op named '{}'{} (`loom gradcheck --list` lists all {})", name,
       near.empty() ? std::string() : fmt::format("; did you mean {}?", list), registered_ops().size());
}

}  // namespace loom
