// optim: each optimizer's trajectory against PyTorch's on the same problem, the
// Noam schedule against its formula, clipping, and a small model that learns.
//
// Provenance of the expected values: /usr/bin/python3 (Debian python3-torch 1.13), float64:
//   w = torch.tensor([0.5, -1.0, 2.0], dtype=torch.float64, requires_grad=True)
//   t = torch.tensor([1., 2., 3.]); c = torch.tensor([1., 0.5, 2.])   (float64)
//   opt = <optimizer>([w]); 3 x (opt.zero_grad(); ((w - t)**2 * c).sum().backward(); opt.step())
//   print(w.tolist())
#include <doctest/doctest.h>

#include <omp.h>

#include <cmath>
#include <functional>
#include <memory>
#include <vector>
#include <string>

#include "loom/nn.h"
#include "loom/ops.h"
#include "loom/optim.h"
#include "helpers.h"

using namespace loom;
using loom::testing::error_of;
using namespace loom::optim;

namespace {

std::vector<double> three_steps(const std::function<std::unique_ptr<Optimizer>(std::vector<Tensor>)>& make) {
  Tensor w = tensor({0.5, -1.0, 2.0}, f64);
  w.requires_grad_();
  Tensor t = tensor({1.0, 2.0, 3.0}, f64), c = tensor({1.0, 0.5, 2.0}, f64);
  auto opt = make({w});
  for (int i = 0; i < 3; ++i) {
    opt->zero_grad();
    Tensor d = sub(w, t);
    sum(mul(mul(d, d), c)).backward();
    opt->step();
  }
  CHECK(opt->steps() == 3);
  return w.to_vector<double>();
}

void check_close(const std::vector<double>& got, const std::vector<double>& expected) {
  REQUIRE(got.size() == expected.size());
  for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == doctest::Approx(expected[i]).epsilon(1e-13));
}
}  // namespace

TEST_CASE("Adam, Adam with L2, AdamW and SGD (plain, momentum, Nesterov) follow PyTorch's trajectories") {
  check_close(three_steps([](auto p) { return std::make_unique<Adam>(p, AdamOptions{.lr = 0.1}); }),
              {0.7951287474397004, -0.7003815239578243, 2.2984137278331622});
  check_close(
      three_steps([](auto p) { return std::make_unique<Adam>(p, AdamOptions{.lr = 0.1, .weight_decay = 0.01}); }),
      {0.7950400516249001, -0.7003845034541586, 2.298396211147531});
  check_close(three_steps([](auto p) {
                return std::make_unique<Adam>(
                    p, AdamOptions{.lr = 0.1, .weight_decay = 0.1, .decoupled_weight_decay = true});
              }),
              {0.7777561630547124, -0.6737130232987613, 2.2364618866496566});  // torch.optim.AdamW
  check_close(three_steps([](auto p) { return std::make_unique<SGD>(p, SGDOptions{.lr = 0.1}); }),
              {0.744, -0.18699999999999994, 2.7840000000000003});
  check_close(three_steps([](auto p) {
                return std::make_unique<SGD>(
                    p, SGDOptions{.lr = 0.1, .momentum = 0.9, .dampening = 0.1, .weight_decay = 0.01});
              }),
              {0.947998233595, 0.4752108758100001, 3.49409948638});
  check_close(three_steps([](auto p) {
                return std::make_unique<SGD>(p, SGDOptions{.lr = 0.1, .momentum = 0.9, .nesterov = true});
              }),
              {1.054176, 1.018037, 3.433296});
}

TEST_CASE("Noam: linear warm-up, then 1/sqrt(step); the peak at step = warmup") {
  Tensor w = tensor({1.0}, f64);
  w.requires_grad_();
  Adam adam({w}, {.lr = 0.0, .betas = {0.9, 0.98}, .eps = 1e-9});
  Noam noam(adam, 512, 4000);
  const double peak = 1.0 / std::sqrt(512.0 * 4000.0);
  CHECK(noam.rate(4000) == doctest::Approx(peak).epsilon(1e-15));
  CHECK(noam.rate(2000) == doctest::Approx(peak / 2).epsilon(1e-15));   // rising linearly
  CHECK(noam.rate(16000) == doctest::Approx(peak / 2).epsilon(1e-15));  // sqrt(4000 / 16000)
  CHECK(noam.rate(1) == doctest::Approx(std::pow(512.0, -0.5) * std::pow(4000.0, -1.5)).epsilon(1e-15));
  CHECK(noam.step() == noam.rate(1));
  CHECK(adam.lr() == noam.rate(1));
  CHECK(noam.step() == noam.rate(2));
  CHECK(noam.current_step() == 2);
  CHECK(error_of([&] { Noam bad(adam, 512, 0); }) ==
        "Noam: d_model, warmup and factor must be positive, got 512, 0 and 1");
}

TEST_CASE("Noam with a cool-down: unchanged up to its start, then scaled down linearly to the end") {
  Tensor w = tensor({1.0}, f64);
  w.requires_grad_();
  Adam adam({w}, {.lr = 0.0, .betas = {0.9, 0.98}, .eps = 1e-9});
  Noam plain(adam, 256, 100), cooled(adam, 256, 100);
  cooled.set_cooldown(600, 1000);
  for (int64_t s : {1, 50, 100, 599, 600}) CHECK(cooled.rate(s) == plain.rate(s));
  CHECK(cooled.rate(601) == plain.rate(601));  // (1000 - 601 + 1) / 400: the first cooled step is at full rate
  CHECK(cooled.rate(800) == doctest::Approx(plain.rate(800) * 201.0 / 400.0).epsilon(1e-15));
  CHECK(cooled.rate(1000) == doctest::Approx(plain.rate(1000) / 400.0).epsilon(1e-15));
  CHECK(cooled.rate(1200) == doctest::Approx(plain.rate(1200) / 400.0).epsilon(1e-15));  // past the end: no lower
  for (int64_t s = 601; s < 1000; ++s) CHECK(cooled.rate(s + 1) < cooled.rate(s));
  cooled.set_cooldown(0, 0);  // off again
  CHECK(cooled.rate(800) == plain.rate(800));
  CHECK(error_of([&] { cooled.set_cooldown(10, 5); }) ==
        "Noam: the cool-down must run over steps 0 <= start <= end, got 10 to 5");
}

// Provenance: w = [3, -4], v = [12] (float64) with gradients w and v;
// torch.nn.utils.clip_grad_norm_([w, v], 6.5) returns 13.0 and leaves
// w.grad = [1.4999998846153937, -1.9999998461538582], v.grad = [5.999999538461575].
TEST_CASE("clip_grad_norm: returns the norm, scales as PyTorch; below the limit nothing changes") {
  Tensor w = tensor({3.0, -4.0}, f64), v = tensor({12.0}, f64);
  w.requires_grad_();
  v.requires_grad_();
  add(sum(mul(w, w)), sum(mul(v, v))).backward(tensor({0.5}, f64).reshape({}));
  CHECK(grad_norm({w, v}) == 13.0);
  CHECK(clip_grad_norm({w, v}, 6.5) == 13.0);
  check_close(w.grad().to_vector<double>(), {1.4999998846153937, -1.9999998461538582});
  check_close(v.grad().to_vector<double>(), {5.999999538461575});
  auto before = w.grad().to_vector<double>();
  CHECK(clip_grad_norm({w, v}, 100.0) == doctest::Approx(6.5));
  CHECK(w.grad().to_vector<double>() == before);
}

TEST_CASE("clip_grad_norm_on_device: clip_grad_norm's norm and gradients, bit for bit, without reading the norm back") {
  Generator gen(11);
  for (double max_norm : {0.05, 1e9}) {  // clipped, and not
    CAPTURE(max_norm);
    std::vector<Tensor> host, device;
    for (Shape shape : {Shape{7, 5}, Shape{5}, Shape{3, 2}}) {
      Tensor g = randn(shape, {f32}, gen, 0, 0.1);
      for (auto* params : {&host, &device}) {
        Tensor p = zeros(shape, {f32});
        p.requires_grad_();
        p.set_grad(g.clone());
        params->push_back(p);
      }
    }
    Tensor no_grad = zeros({2}, {f32});  // skipped, as by clip_grad_norm
    no_grad.requires_grad_();
    host.push_back(no_grad);
    device.push_back(no_grad);
    const double norm = clip_grad_norm(host, max_norm);
    const Tensor on_device = clip_grad_norm_on_device(device, max_norm);
    CHECK(on_device.dtype() == f64);
    CHECK(on_device.item<double>() == norm);
    for (size_t i = 0; i + 1 < host.size(); ++i)
      CHECK(host[i].grad().to_vector<float>() == device[i].grad().to_vector<float>());
    if (max_norm < 1) CHECK(grad_norm(device) == doctest::Approx(max_norm).epsilon(1e-5));  // it did clip
  }
  CHECK(!clip_grad_norm_on_device({}, 1.0).defined());
}

TEST_CASE("optimizers: skip parameters without a gradient; refuse non-leaves; a stale graph refuses backward") {
  Tensor used = tensor({1.0, 2.0}, f64), unused = tensor({5.0}, f64);
  used.requires_grad_();
  unused.requires_grad_();
  SGD sgd({used, unused}, {.lr = 0.5});
  sum(mul(used, used)).backward();
  sgd.step();
  CHECK(used.to_vector<double>() == std::vector<double>{0.0, 0.0});
  CHECK(unused.to_vector<double>() == std::vector<double>{5.0});

  Tensor non_leaf = mul(used, tensor({2.0, 2.0}, f64));
  CHECK(error_of([&] { SGD bad({non_leaf}); }) == "optimizer: parameter 0 must be a leaf tensor that requires grad");

  // A graph recorded before a step reads the old weights: backward refuses.
  Tensor w = tensor({1.0, 2.0}, f64);
  w.requires_grad_();
  Adam adam({w}, {.lr = 0.1});
  Tensor first = sum(mul(w, w));
  first.backward(Tensor(), /*retain_graph=*/true);
  adam.step();
  CHECK(error_of([&] { first.backward(); }).find("mul: input 0 (shape [2]) was modified in place") !=
        std::string::npos);
}

TEST_CASE("a two-layer network learns XOR with Adam (loss below 0.01 in 300 steps)") {
  Generator gen(1);
  nn::Linear hidden(2, 16, true, gen), out(16, 1, true, gen);
  std::vector<Tensor> params = hidden.parameters();
  for (const Tensor& p : out.parameters()) params.push_back(p);
  Adam adam(params, {.lr = 0.05});
  Tensor x = tensor({{0, 0}, {0, 1}, {1, 0}, {1, 1}});
  Tensor y = tensor({0, 1, 1, 0}).reshape({4, 1});
  double loss_value = 1;
  for (int step = 0; step < 300; ++step) {
    adam.zero_grad();
    Tensor d = sub(out(tanh(hidden(x))), y);
    Tensor loss = mean(mul(d, d));
    loss.backward();
    adam.step();
    loss_value = loss.item<double>();
  }
  MESSAGE("XOR loss after 300 Adam steps: " << loss_value);
  CHECK(loss_value < 0.01);
}

TEST_CASE("adam_steps_: every parameter in one kernel, adam_step_'s bits, at any thread count") {
  // 70 parameters of assorted sizes (a model's matrices and biases), each at its own update count.
  Generator gen(5);
  std::vector<Tensor> w, g, m, v;
  std::vector<AdamStep> steps;
  for (int k = 0; k < 70; ++k) {
    const Shape shape = k % 3 == 0 ? Shape{97, 131} : k % 3 == 1 ? Shape{131} : Shape{1};
    w.push_back(randn(shape, {DType::f32}, gen)), g.push_back(randn(shape, {DType::f32}, gen));
    m.push_back(randn(shape, {DType::f32}, gen)), v.push_back(abs(randn(shape, {DType::f32}, gen)));
    const double t = 1 + k % 4;
    steps.push_back({.step_size = 0.01 / (1 - std::pow(0.9, t)),
                     .root_correction2 = std::sqrt(1 - std::pow(0.999, t)),
                     .shrink = k % 2 ? 0.999 : 1.0,
                     .l2 = k % 2 ? 0.0 : 0.01});
  }
  auto copies = [](const std::vector<Tensor>& ts) {
    std::vector<Tensor> out;
    for (const Tensor& t : ts) out.push_back(t.clone());
    return out;
  };
  std::vector<Tensor> w1 = copies(w), m1 = copies(m), v1 = copies(v);
  for (size_t k = 0; k < w.size(); ++k) adam_step_(w1[k], g[k], m1[k], v1[k], steps[k]);
  const int saved = omp_get_max_threads();
  for (int threads : {1, 2, 3}) {
    omp_set_num_threads(threads);  // the ranges cross parameters at other places
    std::vector<Tensor> w2 = copies(w), m2 = copies(m), v2 = copies(v);
    adam_steps_(w2, g, m2, v2, steps);
    for (size_t k = 0; k < w.size(); ++k) {
      CAPTURE(k);
      CHECK(w2[k].to_vector<float>() == w1[k].to_vector<float>());
      CHECK(m2[k].to_vector<float>() == m1[k].to_vector<float>());
      CHECK(v2[k].to_vector<float>() == v1[k].to_vector<float>());
    }
  }
  omp_set_num_threads(saved);
  CHECK_THROWS_WITH(adam_steps_({w[0], w[1]}, {g[0]}, {m[0], m[1]}, {v[0], v[1]}, {steps[0], steps[1]}),
                    "adam_steps_: 2 parameters, 1 gradients, 2 and 2 moments, 2 steps: one of each per parameter");
  std::vector<AdamStep> other_betas = {steps[0], steps[1]};
  other_betas[1].beta2 = 0.98;
  CHECK_THROWS_WITH(adam_steps_({w[0], w[1]}, {g[0], g[1]}, {m[0], m[1]}, {v[0], v[1]}, other_betas),
                    "adam_steps_: parameter 1 has other betas or eps than parameter 0");
}
