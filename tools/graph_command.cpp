// `loom graph`: the autograd graph of an expression, one Transformer layer or a
// whole training step of the tiny preset, after a backward pass, drawn by
// Graphviz (SVG, PNG, and the DOT text beside them). Edges carry the norm of the
// gradient that flowed along them; graph_dot (core) writes the DOT.
#include <fmt/core.h>

#include <filesystem>
#include <map>

#include "commands.h"
#include "expression.h"
#include "graph_render.h"
#include "loom/models/transformer.h"
#include "loom/ops.h"
#include "loom/atomic_file.h"
#include "loom/bench_case.h"

namespace loom::tools {

namespace {

// "x=2x3" -> {"x", [2, 3]}.
std::pair<std::string, Shape> parse_shape_flag(const std::string& flag) {
  auto eq = flag.find('=');
  if (eq == std::string::npos || eq == 0)
    throw CLI::ValidationError("--shape", fmt::format("'{}': expected NAME=DIMS, e.g. x=2x3", flag));
  Shape shape;
  std::string dims = flag.substr(eq + 1);
  size_t start = 0;
  while (start <= dims.size()) {
    size_t end = dims.find('x', start);
    std::string part = dims.substr(start, end == std::string::npos ? std::string::npos : end - start);
    int64_t n = 0;
    try {
      size_t used = 0;
      n = std::stoll(part, &used);
      if (used != part.size()) n = 0;
    } catch (const std::exception&) {
    }
    if (n < 1 || n > 4096)
      throw CLI::ValidationError("--shape", fmt::format("'{}': each dim must be a whole number in [1, 4096]", flag));
    shape.push_back(n);
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return {flag.substr(0, eq), shape};
}

// The examples: what a learner can draw without writing C++. The module lives as
// long as the drawing needs its parameters (a graph holds its leaves weakly).
struct Example {
  std::shared_ptr<nn::Module> module;
  std::map<std::string, Tensor> variables;  // an expression's
  Tensor loss;
};

// Parameters labelled by their names in the model (self_attn.w_q.weight, ...).
void name_parameters(nn::Module& module) {
  for (auto& [name, p] : module.named_parameters()) Tensor(p).set_name(name);
}

models::TransformerConfig tiny_config() { return models::presets::tiny(24); }

// One encoder layer of the tiny preset on a [2, 5, d_model] input, loss = mean(y * r), r fixed.
Example encoder_layer_example(Generator& gen) {
  models::TransformerConfig config = tiny_config();
  auto layer = std::make_shared<models::EncoderLayer>(config, gen);
  name_parameters(*layer);
  Tensor x = randn({2, 5, config.d_model}, {DType::f32}, gen);
  x.set_name("x");
  Tensor no_mask = zeros({2, 1, 1, 5}, {DType::b8});
  Tensor y;
  {
    GraphScope scope("encoder.layers.0");
    y = layer->forward(x, no_mask);
  }
  // A fixed random readout (mean(y^2) would be ~1 after the layer's LayerNorm, whatever the weights).
  Tensor readout = randn(y.shape(), {DType::f32}, gen);
  return {.module = layer, .loss = mean(mul(y, readout))};
}

// A training step of the tiny preset: 2 sentences, label-smoothed cross-entropy (0.1), dropout on.
Example training_step_example(Generator& gen) {
  models::TransformerConfig config = tiny_config();
  auto model = std::make_shared<models::Transformer>(config, gen);
  name_parameters(*model);
  model->train();
  Tensor src = bench::random_ids({2, 7}, 1, config.src_vocab, gen);
  Tensor tgt_in = bench::random_ids({2, 6}, 1, config.tgt_vocab, gen);
  Tensor tgt_out = bench::random_ids({2, 6}, 1, config.tgt_vocab, gen);
  return {.module = model, .loss = label_smoothed_cross_entropy((*model)(src, tgt_in), tgt_out, 0.1, config.pad_id)};
}

}  // namespace

void add_graph_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("graph",
                                 "draw the autograd graph (SVG and PNG through Graphviz) with the norm of "
                                 "the gradient along each edge after backward");
  struct Flags {
    std::string expr, example, out = "graph";
    std::vector<std::string> shapes;
    uint64_t seed = 1;
    size_t collapse_above = GraphDotOptions{}.collapse_above;
    bool no_backward = false;
  };
  auto f = std::make_shared<Flags>();
  auto* expr = cmd->add_option("--expr", f->expr,
                               "an expression, e.g. \"tanh(x*w + b)\": names are float64 "
                               "variables (see --shape), numbers constants, + - * / @ ^ and "
                               "tanh exp log sqrt relu sigmoid gelu abs sum mean softmax ...");
  auto* example = cmd->add_option("--example", f->example,
                                  "a built-in graph: layer (one Transformer encoder layer of the tiny preset), step "
                                  "(a whole training step of the tiny preset: forward, loss, backward)")
                      ->check(CLI::IsMember({"layer", "step"}));
  expr->excludes(example);
  cmd->add_option("--shape", f->shapes, "a variable's shape, NAME=DIMS (e.g. x=2x3); default [3]");
  cmd->add_option("--out", f->out, "writes OUT.svg, OUT.png and OUT.dot");
  cmd->add_option("--seed", f->seed, "the values drawn for variables and weights");
  cmd->add_option("--collapse-above", f->collapse_above,
                  "draw each layer as one box when the graph has more nodes than this")
      ->check(CLI::NonNegativeNumber);
  cmd->add_flag("--no-backward", f->no_backward, "draw the graph before backward (no gradient norms)");
  cmd->callback([f] {
    if (f->expr.empty() && f->example.empty())
      throw CLI::ValidationError("graph", "give --expr \"...\" or --example layer|step");
    std::map<std::string, Shape> shapes;
    for (const auto& s : f->shapes) shapes.insert(parse_shape_flag(s));

    GradientTrace trace;
    Example example;
    Tensor& loss = example.loss;
    {
      GradientTraceGuard tracing(trace);
      Generator gen(f->seed);
      if (!f->expr.empty()) {
        ParsedExpression parsed = evaluate_expression(f->expr, shapes, f->seed);
        Tensor y = parsed.value;
        LOOM_CHECK(y.requires_grad(), "--expr \"{}\": has no variables, so there is no graph to draw", f->expr);
        for (const auto& [name, shape] : shapes)
          LOOM_CHECK(parsed.variables.count(name), "--shape {}=...: the expression \"{}\" has no variable '{}'", name,
                     f->expr, name);
        // backward needs a scalar: a non-scalar result is summed (drawn as the last node).
        loss = y.numel() == 1 ? y : sum(y);
        example.variables = parsed.variables;
      } else {
        example = f->example == "layer" ? encoder_layer_example(gen) : training_step_example(gen);
      }
      loss.set_name("loss");
      if (!f->no_backward) loss.backward();
    }
    std::string dot =
        graph_dot(loss, {.trace = f->no_backward ? nullptr : &trace, .collapse_above = f->collapse_above});
    std::filesystem::path out(f->out);
    if (out.has_parent_path()) std::filesystem::create_directories(out.parent_path());
    std::string dot_path = f->out + ".dot";
    write_file(dot_path, dot);
    render_dot(dot, {{"svg", f->out + ".svg"}, {"png", f->out + ".png"}});
    fmt::print("loss {:.6g}\n", loss.detach().to(kCPU).to_vector<double>()[0]);
    if (trace.first_nan_forward) fmt::print("first NaN/Inf in the forward pass: {}\n", trace.first_nan_forward->name);
    if (trace.first_nan_backward) fmt::print("first NaN/Inf made by a backward: {}\n", trace.first_nan_backward->name);
    fmt::print("wrote {0}.svg, {0}.png, {0}.dot\n", f->out);
  });
}

}  // namespace loom::tools
