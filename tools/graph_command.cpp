// `loom graph`: the autograd graph of an expression, one Transformer layer or a
// whole training step of the tiny preset, after a backward pass, drawn by
// Graphviz (SVG, PNG, and the DOT text beside them). Edges carry the norm of the
// gradient that flowed along them; graph_dot (core) writes the DOT.
#include <fmt/core.h>

#include <cctype>
#include <filesystem>
#include <map>

#include "commands.h"
#include "graph_render.h"
#include "loom/models/transformer.h"
#include "loom/ops.h"
#include "loom/atomic_file.h"
#include "loom/bench_case.h"

namespace loom::tools {

namespace {

// ---- a small expression language: tanh(x*w + b), sum(softmax(x @ w)), log(x)^2 ...
// Names are float64 leaves that require grad (shape from --shape, else [3]),
// numbers are constants; + - * / @ (matmul) ^ (a number power), unary minus,
// and the functions below.
const std::map<std::string, Tensor (*)(const Tensor&)>& unary_functions() {
  static const std::map<std::string, Tensor (*)(const Tensor&)> table = {
      {"tanh", [](const Tensor& x) { return tanh(x); }},       {"exp", [](const Tensor& x) { return exp(x); }},
      {"log", [](const Tensor& x) { return log(x); }},         {"sqrt", [](const Tensor& x) { return sqrt(x); }},
      {"rsqrt", [](const Tensor& x) { return rsqrt(x); }},     {"relu", [](const Tensor& x) { return relu(x); }},
      {"sigmoid", [](const Tensor& x) { return sigmoid(x); }}, {"gelu", [](const Tensor& x) { return gelu(x); }},
      {"abs", [](const Tensor& x) { return abs(x); }},         {"neg", [](const Tensor& x) { return neg(x); }},
      {"sum", [](const Tensor& x) { return sum(x); }},         {"mean", [](const Tensor& x) { return mean(x); }},
      {"softmax", [](const Tensor& x) { return softmax(x, -1); }},
      {"log_softmax", [](const Tensor& x) { return log_softmax(x, -1); }},
      {"layer_norm", [](const Tensor& x) { return layer_norm(x, Tensor(), Tensor()); }},
      {"transpose", [](const Tensor& x) { return transpose(x, -2, -1); }},
  };
  return table;
}
const std::map<std::string, Tensor (*)(const Tensor&, const Tensor&)>& binary_functions() {
  static const std::map<std::string, Tensor (*)(const Tensor&, const Tensor&)> table = {
      {"maximum", [](const Tensor& a, const Tensor& b) { return maximum(a, b); }},
      {"minimum", [](const Tensor& a, const Tensor& b) { return minimum(a, b); }},
      {"matmul", [](const Tensor& a, const Tensor& b) { return matmul(a, b); }},
  };
  return table;
}

class ExpressionParser {
 public:
  ExpressionParser(std::string text, const std::map<std::string, Shape>& shapes, uint64_t seed)
      : text_(std::move(text)), shapes_(shapes), gen_(seed) {}

  Tensor parse() {
    Tensor result = expression();
    skip_space();
    if (pos_ != text_.size()) error(fmt::format("unexpected '{}'", text_[pos_]));
    return result;
  }
  const std::map<std::string, Tensor>& variables() const { return variables_; }

 private:
  [[noreturn]] void error(const std::string& what) const {
    fail("--expr \"{}\": {} at column {} (names are variables; numbers constants; + - * / @ ^, and {})", text_, what,
         pos_ + 1, function_names());
  }
  static std::string function_names() {
    std::string names;
    for (const auto& [name, fn] : unary_functions()) names += (names.empty() ? "" : ", ") + name + "(x)";
    for (const auto& [name, fn] : binary_functions()) names += ", " + name + "(a, b)";
    return names;
  }
  void skip_space() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  bool accept(char c) {
    skip_space();
    if (pos_ < text_.size() && text_[pos_] == c) return ++pos_, true;
    return false;
  }
  void expect(char c) {
    if (!accept(c)) error(fmt::format("expected '{}'", c));
  }
  // Bounds that keep a hostile --expr from overflowing the stack (the parser recurses
  // once per nesting level) or drawing a graph no one can read.
  static constexpr int kMaxDepth = 200;
  static constexpr int kMaxOperations = 1000;
  struct Nesting {
    explicit Nesting(ExpressionParser& p) : parser(p) {
      if (++parser.depth_ > kMaxDepth)
        fail("--expr: nested deeper than {} levels (parentheses, functions, unary minus); loom graph draws small "
             "expressions", kMaxDepth);
    }
    ~Nesting() { --parser.depth_; }
    ExpressionParser& parser;
  };
  void count_operation() {
    if (++operations_ > kMaxOperations)
      fail("--expr: more than {} operations; loom graph draws small expressions (a graph of that size is "
           "unreadable)", kMaxOperations);
  }
  // Shape errors from the ops (e.g. a matmul of [3] by [3]) name the expression too.
  template <typename F>
  Tensor apply(const char* what, F f) {
    count_operation();
    try {
      return f();
    } catch (const Error& e) {
      fail("--expr \"{}\": {} failed: {}", text_, what, e.what());
    }
  }
  Tensor expression() {
    Nesting nesting(*this);
    Tensor left = term();
    while (true) {
      if (accept('+')) { Tensor r = term(); left = apply("+", [&] { return add(left, r); }); }
      else if (accept('-')) { Tensor r = term(); left = apply("-", [&] { return sub(left, r); }); }
      else return left;
    }
  }
  Tensor term() {
    Tensor left = unary();
    while (true) {
      if (accept('*')) { Tensor r = unary(); left = apply("*", [&] { return mul(left, r); }); }
      else if (accept('/')) { Tensor r = unary(); left = apply("/", [&] { return div(left, r); }); }
      else if (accept('@')) { Tensor r = unary(); left = apply("@", [&] { return matmul(left, r); }); }
      else return left;
    }
  }
  Tensor unary() {
    Nesting nesting(*this);
    if (accept('-')) {
      Tensor x = unary();
      count_operation();
      return neg(x);
    }
    Tensor base = primary();
    if (accept('^')) {
      skip_space();
      double p = number();
      return apply("^", [&] { return pow(base, p); });
    }
    return base;
  }
  double number() {
    skip_space();
    size_t used = 0;
    double value = 0;
    try {
      value = std::stod(text_.substr(pos_), &used);
    } catch (const std::exception&) {
      error("expected a number");
    }
    pos_ += used;
    return value;
  }
  Tensor primary() {
    skip_space();
    if (pos_ >= text_.size()) error("unexpected end");
    char c = text_[pos_];
    if (accept('(')) {
      Tensor inner = expression();
      expect(')');
      return inner;
    }
    if (std::isdigit(static_cast<unsigned char>(c)) || c == '.') return scalar_tensor(number(), {DType::f64});
    if (!std::isalpha(static_cast<unsigned char>(c)) && c != '_') error(fmt::format("unexpected '{}'", c));
    size_t start = pos_;
    while (pos_ < text_.size() && (std::isalnum(static_cast<unsigned char>(text_[pos_])) || text_[pos_] == '_')) ++pos_;
    std::string name = text_.substr(start, pos_ - start);
    if (accept('(')) {
      Tensor a = expression();
      if (auto f = binary_functions().find(name); f != binary_functions().end()) {
        expect(',');
        Tensor b = expression();
        expect(')');
        return apply(name.c_str(), [&] { return f->second(a, b); });
      }
      expect(')');
      auto f = unary_functions().find(name);
      if (f == unary_functions().end()) error(fmt::format("no function '{}'", name));
      return apply(name.c_str(), [&] { return f->second(a); });
    }
    return variable(name);
  }
  Tensor variable(const std::string& name) {
    if (auto it = variables_.find(name); it != variables_.end()) return it->second;
    auto shape = shapes_.find(name);
    Tensor leaf = randn(shape == shapes_.end() ? Shape{3} : shape->second, {DType::f64}, gen_);
    leaf.requires_grad_();
    leaf.set_name(name);
    return variables_[name] = leaf;
  }

  std::string text_;
  std::map<std::string, Shape> shapes_;
  Generator gen_;
  size_t pos_ = 0;
  int depth_ = 0, operations_ = 0;
  std::map<std::string, Tensor> variables_;
};

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
  auto* cmd = app.add_subcommand("graph", "draw the autograd graph (SVG and PNG through Graphviz) with the norm of "
                                          "the gradient along each edge after backward");
  struct Flags {
    std::string expr, example, out = "graph";
    std::vector<std::string> shapes;
    uint64_t seed = 1;
    size_t collapse_above = 300;
    bool no_backward = false;
  };
  auto f = std::make_shared<Flags>();
  auto* expr = cmd->add_option("--expr", f->expr, "an expression, e.g. \"tanh(x*w + b)\": names are float64 "
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
        ExpressionParser parser(f->expr, shapes, f->seed);
        Tensor y = parser.parse();
        LOOM_CHECK(y.requires_grad(), "--expr \"{}\": has no variables, so there is no graph to draw", f->expr);
        for (const auto& [name, shape] : shapes)
          LOOM_CHECK(parser.variables().count(name), "--shape {}=...: the expression \"{}\" has no variable '{}'",
                     name, f->expr, name);
        // backward needs a scalar: a non-scalar result is summed (drawn as the last node).
        loss = y.numel() == 1 ? y : sum(y);
        example.variables = parser.variables();
      } else {
        example = f->example == "layer" ? encoder_layer_example(gen) : training_step_example(gen);
      }
      loss.set_name("loss");
      if (!f->no_backward) loss.backward();
    }
    std::string dot = graph_dot(loss, {.trace = f->no_backward ? nullptr : &trace, .collapse_above = f->collapse_above});
    std::filesystem::path out(f->out);
    if (out.has_parent_path()) std::filesystem::create_directories(out.parent_path());
    std::string dot_path = f->out + ".dot";
    write_file(dot_path, dot);
    render_dot(dot, {{"svg", f->out + ".svg"}, {"png", f->out + ".png"}});
    fmt::print("loss {:.6g}\n", loss.detach().to(kCPU).to_vector<double>()[0]);
    if (trace.first_nan_forward) fmt::print("first NaN/Inf in the forward pass: {}\n", trace.first_nan_forward->name);
    if (trace.first_nan_backward)
      fmt::print("first NaN/Inf made by a backward: {}\n", trace.first_nan_backward->name);
    fmt::print("wrote {0}.svg, {0}.png, {0}.dot\n", f->out);
  });
}

}  // namespace loom::tools
