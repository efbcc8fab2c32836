// The registry's test matrix over every registered op, and negative controls
// proving each check can fail.
#include <doctest/doctest.h>

#include <algorithm>
#include <set>

#include "loom/backend.h"
#include "loom/gradcheck.h"
#include "loom/kernel_table.h"
#include "loom/ops.h"
#include "loom/standin.h"

using namespace loom;

namespace {
std::string describe(const CheckResult& r) {
  return fmt::format("{} [{}] {}: {} (max abs {:.3e})", r.op, r.sample, r.check, r.message, r.max_abs_error);
}

bool any_failed(const std::vector<CheckResult>& results, const std::string& check) {
  return std::any_of(results.begin(), results.end(),
                     [&](const CheckResult& r) { return r.check == check && !r.passed; });
}

bool all_passed(const std::vector<CheckResult>& results, const std::string& check) {
  bool seen = false;
  for (const auto& r : results)
    if (r.check == check) {
      seen = true;
      if (!r.passed) return false;
    }
  return seen;
}

// y = x^2 with a hand-written backward, wrong in the ways the tests choose.
Tensor square_with(const Tensor& x, std::function<Tensor(const Tensor& x, const Tensor& g)> backward) {
  Tensor out = mul(x.detach(), x.detach());
  return record("square_under_test", {x}, out, [x, backward](BackwardContext&, const Tensor& g) -> std::vector<Tensor> {
    return {backward(x, g)};
  });
}
}  // namespace

TEST_CASE("every registered op passes its whole test matrix") {
  enable_standin_device();  // adds the device rows: every op on the stand-in device against the CPU
  const auto& ops = registered_ops();
  REQUIRE(!ops.empty());
  // A GPU adds its own device rows (a CUDA build without one: see the next case).
  const bool gpu = has_backend(DeviceType::cuda) && backend(DeviceType::cuda).device_count() > 0;
  const size_t devices = gpu ? 2 : 1;
  for (const OpInfo& op : ops) {
    SUBCASE(op.name.c_str()) {
      auto results = check_op(op);
      CHECK(!results.empty());
      for (const auto& r : results) {
        INFO(describe(r));
        CHECK(r.passed);
      }
      // No silent skips: a differentiable op runs gradcheck (and, unless it
      // says why not, gradgradcheck) on every one of its samples.
      if (op.differentiable) {
        size_t gradchecks = std::count_if(results.begin(), results.end(), [](auto& r) { return r.check == "gradcheck"; });
        CHECK(gradchecks == op.samples.size());
        size_t gradgrads = std::count_if(results.begin(), results.end(), [](auto& r) { return r.check == "gradgradcheck"; });
        if (op.gradgrad) CHECK(gradgrads == op.samples.size());
        else CHECK_MESSAGE(!op.note.empty(), op.name, " turns gradgradcheck off without saying why");
      }
      size_t device_rows = std::count_if(results.begin(), results.end(), [](auto& r) { return r.check == "device"; });
      CHECK(device_rows == devices * op.samples.size());
    }
  }
}

TEST_CASE("a CUDA build without a GPU says which device rows it skips") {
  if (!has_backend(DeviceType::cuda) || backend(DeviceType::cuda).device_count() > 0) return;
  size_t samples = 0;
  for (const OpInfo& op : registered_ops()) samples += op.samples.size();
  CHECK(samples > 0);
  fmt::print("cuda: no device, {} rows skipped\n", samples);
}

TEST_CASE("every LOOM_OP in ops/'s sources is registered, in any link (static included)") {
  CHECK(detail::registrations_in_sources() > 70);
  CHECK(registered_ops().size() == static_cast<size_t>(detail::registrations_in_sources()));
}

TEST_CASE("the ops of the foundation are all registered") {
  std::set<std::string> names;
  for (const auto& op : registered_ops()) names.insert(op.name);
  for (const char* required : {"add", "sub", "mul", "div", "neg", "exp", "log", "tanh", "relu", "pow", "sum", "mean",
                               "matmul", "reshape", "view", "permute", "transpose", "slice", "narrow", "select",
                               "expand", "squeeze", "unsqueeze", "clone"}) {
    INFO(required);
    CHECK(names.count(required) == 1);
  }
}

TEST_CASE("tolerances are the documented, fixed ones") {
  GradcheckTolerance tol;
  CHECK(tol.eps == 1e-6);
  CHECK(tol.atol == 1e-5);
  CHECK(tol.rtol == 1e-3);
}

TEST_CASE("negative control: a wrong backward formula fails gradcheck") {
  OpInfo bad{
      .name = "bad_square",
      .call = [](const OpArgs& x) { return square_with(x[0], [](const Tensor& x, const Tensor& g) { return g * x; }); },
      .samples = {unary_sample({3, 4})},
  };
  auto results = check_op(bad);
  CHECK(any_failed(results, "gradcheck"));
  CHECK(any_failed(results, "noncontiguous"));
  CHECK(any_failed(results, "broadcast"));
  // The failure says where: which output, which input element, and both values.
  for (const auto& r : results)
    if (r.check == "gradcheck") CHECK(r.message.find("analytic") != std::string::npos);

  OpInfo good = bad;
  good.name = "good_square";
  good.call = [](const OpArgs& x) { return square_with(x[0], [](const Tensor& x, const Tensor& g) { return g * x * 2.0; }); };
  for (const auto& r : check_op(good)) {
    INFO(describe(r));
    CHECK(r.passed);
  }
}

TEST_CASE("negative control: a backward that is right but not differentiable fails gradgradcheck") {
  // 2*g*x with x detached: first derivatives are right, second derivatives are lost.
  OpInfo frozen{
      .name = "frozen_square",
      .call = [](const OpArgs& x) {
        return square_with(x[0], [](const Tensor& x, const Tensor& g) { return g * x.detach() * 2.0; });
      },
      .samples = {unary_sample({3, 4})},
  };
  auto results = check_op(frozen);
  CHECK(all_passed(results, "gradcheck"));
  CHECK(any_failed(results, "gradgradcheck"));
}

TEST_CASE("negative control: a kernel that ignores strides fails the non-contiguous check") {
  // Reads storage in memory order, as if every input were contiguous.
  OpInfo naive{
      .name = "stride_blind_neg",
      .call = [](const OpArgs& x) {
        Tensor flat = Tensor::make_view(x[0], x[0].shape(), contiguous_strides(x[0].shape()), x[0].offset());
        return neg(flat);
      },
      .samples = {unary_sample({3, 4})},
      .differentiable = false,
  };
  auto results = check_op(naive);
  CHECK(any_failed(results, "noncontiguous"));
}

TEST_CASE("negative control: a fused op that differs from its composition fails the composed check") {
  OpInfo fused{
      .name = "fused_square",
      .call = [](const OpArgs& x) { return x[0] * x[0]; },
      .samples = {unary_sample({3, 4})},
      .composed = [](const OpArgs& x) { return x[0] * x[0] * 1.0000001; },
  };
  auto results = check_op(fused);
  CHECK(any_failed(results, "composed"));
  fused.composed = [](const OpArgs& x) { return pow(x[0], 2.0); };
  CHECK(all_passed(check_op(fused), "composed"));
}

TEST_CASE("negative control: a fast kernel that drifts from its reference fails the reference check") {
  OpInfo drifting{
      .name = "drifting_double",
      .call = [](const OpArgs& x) { return x[0] * (kernel_mode() == KernelMode::reference ? 2.0 : 2.0000001); },
      .samples = {unary_sample({3, 4})},
  };
  CHECK(any_failed(check_op(drifting), "reference"));
}
