// The autograd engine: leaves, accumulation, graphs, hooks, higher derivatives, anomaly mode.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <regex>
#include <sstream>
#include <string>
#include <thread>

#include "loom/ops.h"
#include "helpers.h"

using namespace loom;
using loom::testing::error_of;

namespace {
std::vector<double> values(const Tensor& t) { return t.to_vector<double>(); }

Tensor leaf(std::initializer_list<double> v) {
  Tensor t = tensor(v, f64);
  t.requires_grad_();
  return t;
}

}  // namespace

TEST_CASE("gradient by hand and by machine: d/dx sum(x*x) = 2x") {
  Tensor x = leaf({1, 2, 3});
  Tensor y = (x * x).sum();
  y.backward();
  CHECK(values(x.grad()) == std::vector<double>{2, 4, 6});
  CHECK(x.is_leaf());
  CHECK_FALSE(y.is_leaf());
  CHECK(y.grad_fn()->name == "sum");
}

TEST_CASE("gradients accumulate across backward calls until cleared") {
  Tensor x = leaf({1, 2});
  (x * 3.0).sum().backward();
  (x * 3.0).sum().backward();
  CHECK(values(x.grad()) == std::vector<double>{6, 6});
  x.set_grad({});
  (x * x).sum().backward();
  CHECK(values(x.grad()) == std::vector<double>{2, 4});
}

TEST_CASE("a tensor used twice gets the sum of both paths, and .grad never aliases") {
  Tensor a = leaf({1, 2}), b = leaf({3, 4});
  Tensor y = (a + b).sum();
  y.backward();
  // add hands the same gradient to both inputs: each .grad must own its memory.
  CHECK(a.grad().storage() != b.grad().storage());
  Tensor x = leaf({2, 5});
  (x * x + x).sum().backward();
  CHECK(values(x.grad()) == std::vector<double>{5, 11});
}

TEST_CASE("expanded gradients arrive in dense memory") {
  Tensor x = leaf({1, 2, 3});
  Tensor y = x.reshape({3, 1}).expand({3, 4}).sum();
  y.backward();
  CHECK(x.grad().is_contiguous());
  CHECK(x.grad().strides() == Shape{1});
  CHECK(values(x.grad()) == std::vector<double>{4, 4, 4});
}

TEST_CASE("a non-scalar output needs an explicit seed gradient") {
  Tensor x = leaf({1, 2, 3});
  Tensor y = x * 2.0;
  std::string message = error_of([&] { y.backward(); });
  CHECK(message.find("only for scalar outputs") != std::string::npos);
  CHECK(message.find("[3]") != std::string::npos);
  y.backward(tensor({1, 10, 100}, f64));
  CHECK(values(x.grad()) == std::vector<double>{2, 20, 200});
}

TEST_CASE("retain_graph: a second backward through a freed graph is a clear error") {
  Tensor x = leaf({1, 2});
  Tensor y = (exp(x)).sum();
  y.backward();
  std::string message = error_of([&] { y.backward(); });
  CHECK(message.find("second time") != std::string::npos);
  CHECK(message.find("retain_graph") != std::string::npos);

  Tensor z = exp(x).sum();
  x.set_grad({});
  z.backward({}, /*retain_graph=*/true);
  z.backward();
  CHECK(values(x.grad())[0] == doctest::Approx(2 * std::exp(1.0)));
}

TEST_CASE("retain_grad keeps .grad on a non-leaf; leaves always keep theirs") {
  Tensor x = leaf({1, 2});
  Tensor h = x * 3.0;
  Tensor h2 = x * 4.0;
  h.retain_grad();
  (h * h + h2).sum().backward();
  CHECK(values(h.grad()) == std::vector<double>{6, 12});  // d/dh h^2 = 2h
  CHECK_FALSE(h2.grad().defined());
  CHECK(values(x.grad()) == std::vector<double>{22, 40});
}

TEST_CASE("NoGradGuard records nothing; detach cuts the graph but shares storage") {
  Tensor x = leaf({1, 2});
  {
    NoGradGuard no_grad;
    Tensor y = x * 2.0;
    CHECK_FALSE(y.requires_grad());
    CHECK(y.grad_fn() == nullptr);
  }
  CHECK((x * 2.0).requires_grad());
  Tensor d = (x * 2.0).detach();
  CHECK_FALSE(d.requires_grad());
  Tensor x2 = x.detach();
  CHECK(x2.storage() == x.storage());
  Tensor y = (x * x2).sum();  // x2 is a constant here
  y.backward();
  CHECK(values(x.grad()) == std::vector<double>{1, 2});
}

TEST_CASE("create_graph: second and third derivatives of x^3") {
  Tensor x = leaf({2.0, -1.0});
  Tensor y = pow(x, 3.0).sum();
  auto g1 = grad({y}, {x}, {}, false, /*create_graph=*/true);  // 3x^2
  CHECK(values(g1[0]) == std::vector<double>{12, 3});
  auto g2 = grad({g1[0].sum()}, {x}, {}, false, true);  // 6x
  CHECK(values(g2[0]) == std::vector<double>{12, -6});
  auto g3 = grad({g2[0].sum()}, {x}, {}, false, false);  // 6
  CHECK(values(g3[0]) == std::vector<double>{6, 6});
}

TEST_CASE("backward(create_graph) leaves a differentiable .grad") {
  Tensor x = leaf({0.5});
  Tensor y = tanh(x).sum();
  y.backward({}, false, /*create_graph=*/true);
  Tensor first = x.grad();  // 1 - tanh^2
  CHECK(first.requires_grad());
  auto second = grad({first.sum()}, {x});  // -2 tanh (1 - tanh^2)
  double t = std::tanh(0.5);
  CHECK(values(second[0])[0] == doctest::Approx(-2 * t * (1 - t * t)));
}

TEST_CASE("grad(): unused inputs need allow_unused; .grad is untouched") {
  Tensor x = leaf({1, 2}), unused = leaf({5});
  Tensor y = (x * x).sum();
  std::string message = error_of([&] { grad({y}, {x, unused}, {}, true); });
  CHECK(message.find("not used") != std::string::npos);
  auto g = grad({y}, {x, unused}, {}, false, false, /*allow_unused=*/true);
  CHECK(values(g[0]) == std::vector<double>{2, 4});
  CHECK_FALSE(g[1].defined());
  CHECK_FALSE(x.grad().defined());
}

TEST_CASE("a 10,000-op chain runs backward without recursion") {
  Tensor x = leaf({1.0});
  Tensor y = x;
  for (int i = 0; i < 10000; ++i) y = y * 1.0001;
  y.sum().backward();
  CHECK(values(x.grad())[0] == doctest::Approx(std::pow(1.0001, 10000)).epsilon(1e-9));
  // And a much deeper one: iterative traversal, iterative destruction.
  Tensor z = x;
  for (int i = 0; i < 100000; ++i) z = z + 0.0;
  x.set_grad({});
  z.sum().backward();
  CHECK(values(x.grad())[0] == 1.0);
}

TEST_CASE("hooks see the gradient and can replace it") {
  Tensor x = leaf({1, 2, 3});
  Tensor h = x * 2.0;
  std::vector<double> seen;
  h.register_hook([&](const Tensor& g) {
    seen = values(g);
    return Tensor();  // just look
  });
  x.register_hook([](const Tensor& g) { return g * 10.0; });  // replace on the leaf
  (h * h).sum().backward();
  CHECK(seen == std::vector<double>{4, 8, 12});                  // 2h
  CHECK(values(x.grad()) == std::vector<double>{80, 160, 240});  // 10 * 2 * 2h
  Tensor c = tensor({1.0}, f64);
  CHECK(error_of([&] { c.register_hook([](const Tensor& g) { return g; }); }).find("does not require grad") !=
        std::string::npos);
}

TEST_CASE("gradients arriving at a node are summed in place only where nothing else sees the sum") {
  // a gets 2 (b's path, which runs first: b was made after p) and then 5 (p's); b's
  // gradient is handed on to a as the same tensor (add's backward passes g
  // through), so a's sum must go to new memory: b's retained .grad, a hook's copy
  // and the caller's seed keep their values.
  Tensor x = leaf({1, 2, 3});
  Tensor a = x * 1.0;
  Tensor p = a * 5.0;
  Tensor b = a + scalar_tensor(0.0, {f64});
  b.retain_grad();
  Tensor hooked;
  b.register_hook([&](const Tensor& g) {
    hooked = g;  // holds the tensor itself
    return Tensor();
  });
  Tensor y = p + b * 2.0;
  Tensor seed = tensor({1.0, 1.0, 1.0}, f64);
  y.backward(seed);
  CHECK(values(b.grad()) == std::vector<double>{2, 2, 2});
  CHECK(values(hooked) == std::vector<double>{2, 2, 2});
  CHECK(values(x.grad()) == std::vector<double>{7, 7, 7});
  CHECK(values(seed) == std::vector<double>{1, 1, 1});
  // Three gradients into one node, two of them fresh (mul's): summed in place, the
  // same values as pairwise adds.
  Tensor z = leaf({1, -2, 0.5});
  Tensor m = z * 1.0;
  ((m * 3.0) + (m * 4.0) + m * m).sum().backward();
  CHECK(values(z.grad()) == std::vector<double>{3 + 4 + 2 * 1.0, 3 + 4 - 2 * 2.0, 3 + 4 + 2 * 0.5});
}

TEST_CASE("anomaly mode names the op and the user's line that made a NaN") {
  AnomalyGuard anomaly;
  Tensor x = leaf({-1.0, 2.0});
  int line = __LINE__ + 1;
  std::string forward = error_of([&] { Tensor y = log(x); });
  CHECK(forward.find("log produced NaN or Inf") != std::string::npos);
  CHECK(forward.find(fmt::format("test_autograd.cpp:{}", line)) != std::string::npos);

  // Backward: sqrt via pow(x, 0.5) is finite at 0, its derivative is not.
  Tensor z = leaf({0.0, 4.0});
  int pow_line = __LINE__ + 1;
  Tensor s = pow(z, 0.5).sum();
  std::string backward = error_of([&] { s.backward(); });
  CHECK(backward.find("backward of pow produced NaN or Inf") != std::string::npos);
  CHECK(backward.find(fmt::format("test_autograd.cpp:{}", pow_line)) != std::string::npos);

  // Operators capture the caller's line too.
  Tensor inf = tensor({std::numeric_limits<double>::infinity()}, f64);
  int mul_line = __LINE__ + 1;
  std::string op = error_of([&] { Tensor p = inf * 0.0; });
  CHECK(op.find("mul produced NaN or Inf") != std::string::npos);
  CHECK(op.find(fmt::format("test_autograd.cpp:{}", mul_line)) != std::string::npos);
}

TEST_CASE("without anomaly mode NaNs pass silently (it is opt-in)") {
  Tensor x = tensor({-1.0}, f64);
  CHECK(std::isnan(values(log(x))[0]));
}

TEST_CASE("graph export: DOT names the ops, shapes and trainable leaves") {
  Tensor w = Tensor(tensor({{1, 2}, {3, 4}}, f64)).set_name("w");
  w.requires_grad_();
  Tensor x = tensor({{1, 0}}, f64);
  Tensor y = tanh(matmul(x, w)).sum();
  std::string dot = graph_dot(y);
  CHECK(dot.find("digraph") == 0);
  CHECK(dot.find("tanh") != std::string::npos);
  CHECK(dot.find("matmul") != std::string::npos);
  CHECK(dot.find("w (requires grad)") != std::string::npos);
  CHECK(dot.find("[2, 2]") != std::string::npos);
  CHECK(dot.find("constant") != std::string::npos);  // x needs no grad
}

namespace {
// The DOT lines of nodes ("n12 [label=...") and the edge from node a to node b, if any.
size_t count_nodes(const std::string& dot) {
  static const std::regex node_line(R"(^ +n[0-9]+ \[label=)");
  size_t count = 0;
  std::istringstream lines(dot);
  for (std::string line; std::getline(lines, line);) count += std::regex_search(line, node_line);
  return count;
}
std::string node_id(const std::string& dot, const std::string& label_start) {
  size_t at = dot.find("[label=\"" + label_start);
  REQUIRE(at != std::string::npos);
  size_t start = dot.rfind('\n', at) + 1;
  return dot.substr(start, at - start);  // "  n3 "
}
std::string trim(std::string s) {
  s.erase(0, s.find_first_not_of(' '));
  s.erase(s.find_last_not_of(' ') + 1);
  return s;
}
}  // namespace

TEST_CASE("graph pictures: nodes, source lines, and each edge labelled with the gradient norm that flowed") {
  Tensor x = leaf({0.5, -1.0, 2.0}).set_name("x");
  Tensor w = leaf({1.5, 0.25, -0.75}).set_name("w");
  Tensor b = leaf({0.1, 0.2, 0.3}).set_name("b");
  GradientTrace trace;
  Tensor loss;
  {
    GradientTraceGuard tracing(trace);
    loss = tanh(x * w + b).sum();  // the line every node names
    loss.backward();
  }
  const int line = __LINE__ - 3;
  std::string dot = graph_dot(loss, {.trace = &trace});
  // sum, tanh, add, mul and three leaves.
  CHECK(count_nodes(dot) == 7);
  CHECK(dot.find(fmt::format("test_autograd.cpp:{}", line)) != std::string::npos);
  // The edge from mul to x carried dL/dx: its norm, computed directly from x.grad.
  std::vector<double> gx = values(x.grad());
  double norm = std::sqrt(gx[0] * gx[0] + gx[1] * gx[1] + gx[2] * gx[2]);
  std::string mul = trim(node_id(dot, "mul")), xs = trim(node_id(dot, "x (requires grad)"));
  CHECK(dot.find(fmt::format("{} -> {} [label=\"{:.3g}\"]", mul, xs, norm)) != std::string::npos);
  bool found = false;
  for (const auto& [edge, flow] : trace.edges)
    if (edge.first->name == "mul" && edge.second == 0) {
      CHECK(flow.norm == doctest::Approx(norm).epsilon(1e-14));
      found = true;
    }
  CHECK(found);
  CHECK(trace.first_nan_forward == nullptr);
  CHECK(trace.first_nan_backward == nullptr);
}

TEST_CASE("graph pictures: the first NaN producer and all-zero gradients are highlighted") {
  Tensor x = leaf({-1.0, 4.0}).set_name("x");
  Tensor z = leaf({-2.0, -3.0}).set_name("z");
  GradientTrace trace;
  Tensor loss;
  {
    GradientTraceGuard tracing(trace);
    Tensor bad = log(x);             // log(-1) = NaN: the first producer
    Tensor worse = exp(bad);         // NaN again, but not first
    loss = (worse + relu(z)).sum();  // relu of negatives: zero gradient into z
    loss.backward();
  }
  REQUIRE(trace.first_nan_forward != nullptr);
  CHECK(trace.first_nan_forward->name == "log");
  std::string dot = graph_dot(loss, {.trace = &trace});
  size_t marked = dot.find("first NaN/Inf (forward)");
  REQUIRE(marked != std::string::npos);
  size_t line_start = dot.rfind('\n', marked);
  CHECK(dot.substr(line_start, marked - line_start).find("label=\"log") != std::string::npos);
  CHECK(dot.find("first NaN/Inf (forward)", marked + 1) == std::string::npos);  // one first producer
  CHECK(dot.find("fillcolor=red") != std::string::npos);
  CHECK(dot.find("0 (all zero)") != std::string::npos);          // relu -> z
  CHECK(dot.find("NaN/Inf\", color=red") != std::string::npos);  // a NaN gradient edge
}

TEST_CASE("graph pictures: scopes become clusters, and one box each when the graph is large") {
  Tensor x = leaf({0.5, -0.25}).set_name("x");
  Tensor h = x;
  for (int layer = 0; layer < 3; ++layer) {
    GraphScope scope(fmt::format("layers.{}", layer));
    for (int k = 0; k < 4; ++k) h = tanh(h * 1.5);
  }
  Tensor loss = h.sum();
  std::string full = graph_dot(loss);
  CHECK(full.find("subgraph cluster_0") != std::string::npos);
  CHECK(full.find("label=\"layers.2\"") != std::string::npos);
  CHECK(count_nodes(full) == 3 * 8 + 2);  // 3 layers of 4 (mul, tanh); sum; the leaf
  // The leaf is used by layers.0 alone, so it is drawn in that cluster (as a layer's weights are).
  CHECK(full.find("label=\"x (requires grad)") > full.find("label=\"layers.0\""));
  std::string collapsed = graph_dot(loss, {.collapse_above = 10});
  CHECK(collapsed.find("subgraph") == std::string::npos);
  CHECK(collapsed.find("\"scope layers.1\" [label=\"layers.1\\n8 ops\"") != std::string::npos);
  CHECK(collapsed.find("\"scope layers.1\" -> \"scope layers.0\"") != std::string::npos);
}

TEST_CASE("grad with named options: a second derivative") {
  Tensor x = leaf({1.0, -2.0});
  Tensor y = (x * x * x).sum();
  std::vector<Tensor> dy = grad({y}, {x}, {}, {.create_graph = true});  // 3x^2, itself differentiable
  CHECK(values(dy[0]) == std::vector<double>{3, 12});
  std::vector<Tensor> d2y = grad({dy[0].sum()}, {x});
  CHECK(values(d2y[0]) == std::vector<double>{6, -12});
  Tensor unused = leaf({5.0});
  CHECK(!grad({(x * x).sum()}, {unused}, {}, {.allow_unused = true})[0].defined());
}

TEST_CASE("to_dtype passes the gradient back in the input's dtype, exactly") {
  Tensor x = leaf({1.5, -2.25});
  Tensor y = (to_dtype(x, f32) * 2.0).sum();
  y.backward();
  CHECK(x.grad().dtype() == f64);
  CHECK(values(x.grad()) == std::vector<double>{2, 2});
}

TEST_CASE("in-place writes to tensors that require grad need NoGradGuard") {
  Tensor w = leaf({1, 2});
  std::string message = error_of([&] { copy_(w, tensor({3, 4}, f64)); });
  CHECK(message.find("copy_: in-place write to a tensor that requires grad") != std::string::npos);
  NoGradGuard no_grad;
  uint64_t version = w.storage()->version();
  copy_(w, tensor({3, 4}, f64));
  CHECK(values(w) == std::vector<double>{3, 4});
  CHECK(w.storage()->version() == version + 1);
}

TEST_CASE("a tensor written in place after the forward pass used it: backward refuses, naming op and tensor") {
  // mul's backward reads x; writing x afterwards would give w a wrong gradient.
  Tensor w = leaf({1, 2});
  Tensor x = tensor({3, 4}, f64);
  Tensor y = sum(mul(w, x));
  {
    NoGradGuard no_grad;
    copy_(x, tensor({5, 6}, f64));
  }
  std::string message = error_of([&] { y.backward(); });
  CHECK(message.find("mul: input 1 (shape [2]) was modified in place") != std::string::npos);
  CHECK(message.find("storage version 1 now, 0 then") != std::string::npos);
  CHECK(message.find("test_autograd.cpp") != std::string::npos);  // the user's line that called mul

  // softmax's backward reads its output (here the root: a consumer of p would
  // complain first, as every input is checked).
  Tensor z = leaf({1, 2});
  Tensor p = softmax(z);
  {
    NoGradGuard no_grad;
    fill_(p, 0.5);
  }
  message = error_of([&] { p.backward(tensor({1, 3}, f64)); });
  CHECK(message.find("softmax: its output (shape [2]) was modified in place") != std::string::npos);

  // Writing after backward (an optimizer step) is fine, and the next step sees the new values.
  Tensor v = leaf({1, 2});
  sum(mul(v, v)).backward();
  CHECK(values(v.grad()) == std::vector<double>{2, 4});
  {
    NoGradGuard no_grad;
    copy_(v, tensor({3, 4}, f64));
  }
  v.set_grad(Tensor());
  sum(mul(v, v)).backward();
  CHECK(values(v.grad()) == std::vector<double>{6, 8});
}

TEST_CASE("backward on several threads into one leaf: every accumulation kept, one accumulator") {
  // Each thread builds its own graph over the shared leaf (gradient_edge makes its
  // AccumulateGrad once, under the leaf's lock) and adds into .grad (read-add-write locked).
  Tensor x = leaf({1, 2});
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([x] {
      for (int i = 0; i < 200; ++i) (x * 1.0).sum().backward();
    });
  for (auto& thread : threads) thread.join();
  CHECK(values(x.grad()) == std::vector<double>{1600, 1600});
}
