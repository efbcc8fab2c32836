// The registry's test matrix over every registered op, and negative controls
// proving each check can fail.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <set>
#include <sstream>

#include "loom/backend.h"
#include "loom/explain.h"
#include "loom/gradcheck.h"
#include "loom/kernel_table.h"
#include "loom/ops.h"
#include "helpers.h"
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
  return record("square_under_test", {x}, out,
                [x, backward](BackwardContext&, const Tensor& g) -> std::vector<Tensor> { return {backward(x, g)}; });
}
}  // namespace

TEST_CASE("every registered op passes its whole test matrix") {
  // Under a sanitizer the gradient rows run in fast mode: every forward and backward
  // kernel still runs, on a fraction of the work (the release run checks whole Jacobians).
  const GradcheckOptions options{.fast_mode = testing::kSanitized};
  enable_standin_device();  // adds the device rows: every op on the stand-in device against the CPU
  const auto& ops = registered_ops();
  REQUIRE(!ops.empty());
  // A GPU adds its own device rows (a CUDA build without one: see the next case).
  const bool gpu = has_backend(DeviceType::cuda) && backend(DeviceType::cuda).device_count() > 0;
  const size_t devices = gpu ? 2 : 1;
  for (const OpInfo& op : ops) {
    SUBCASE(op.name.c_str()) {
      auto results = check_op(op, options);
      CHECK(!results.empty());
      for (const auto& r : results) {
        INFO(describe(r));
        CHECK(r.passed);
      }
      // No silent skips: a differentiable op runs gradcheck (and, unless it
      // says why not, gradgradcheck) on every one of its samples.
      if (op.differentiable) {
        size_t gradchecks =
            std::count_if(results.begin(), results.end(), [](auto& r) { return r.check == "gradcheck"; });
        CHECK(gradchecks == op.samples.size());
        size_t gradgrads =
            std::count_if(results.begin(), results.end(), [](auto& r) { return r.check == "gradgradcheck"; });
        if (op.gradgrad)
          CHECK(gradgrads == op.samples.size());
        else
          CHECK_MESSAGE(!op.note.empty(), op.name, " turns gradgradcheck off without saying why");
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
  for (const char* required : {"add",       "sub",   "mul",    "div",    "neg",    "exp",     "log",       "tanh",
                               "relu",      "pow",   "sum",    "mean",   "matmul", "reshape", "view",      "permute",
                               "transpose", "slice", "narrow", "select", "expand", "squeeze", "unsqueeze", "clone"}) {
    INFO(required);
    CHECK(names.count(required) == 1);
  }
}

namespace {
std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE_MESSAGE(in.good(), "cannot read ", path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}
}  // namespace

TEST_CASE("docs/adding-an-op.md: the op it adds, softplus, is registered and checked") {
  const OpInfo* softplus_op = nullptr;
  for (const auto& op : registered_ops())
    if (op.name == "softplus") softplus_op = &op;
  REQUIRE(softplus_op != nullptr);
  CHECK(softplus_op->differentiable);
  auto results = check_op(*softplus_op);
  size_t gradchecks = 0, gradgrads = 0;
  for (const auto& r : results) {
    INFO(describe(r));
    CHECK(r.passed);
    gradchecks += r.check == "gradcheck";
    gradgrads += r.check == "gradgradcheck";
  }
  CHECK(gradchecks == softplus_op->samples.size());
  CHECK(gradgrads == softplus_op->samples.size());

  // Stable at both ends: x for large x, e^x for very negative x (log(1 + e^x) would give inf and 0).
  for (DType dtype : {DType::f32, DType::f64}) {
    INFO(dtype_name(dtype));
    auto y = softplus(from_vector(std::vector<double>{100.0, -80.0, 0.0, 1.0}, {4}, {dtype})).to_vector<double>();
    const double tol = dtype == DType::f32 ? 1e-6 : 1e-14;
    CHECK(y[0] == doctest::Approx(100.0).epsilon(tol));
    CHECK(y[1] == doctest::Approx(std::exp(-80.0)).epsilon(tol));
    CHECK(y[2] == doctest::Approx(std::log(2.0)).epsilon(tol));
    CHECK(y[3] == doctest::Approx(std::log1p(std::exp(1.0))).epsilon(tol));
  }
}

namespace {
// The rows of the guide's table that starts with `header`: the files it names, in order.
std::vector<std::string> table_files(const std::string& guide, const std::string& header) {
  const size_t table = guide.find(header);
  REQUIRE(table != std::string::npos);
  const std::string rows = guide.substr(table, guide.find("\n\n", table) - table);
  std::vector<std::string> files;
  for (size_t at = rows.find("\n| `"); at != std::string::npos; at = rows.find("\n| `", at + 1))
    files.push_back(rows.substr(at + 4, rows.find('`', at + 4) - at - 4));
  return files;
}
}  // namespace

TEST_CASE("docs/adding-an-op.md shows the real code: the op files whole, the other lines verbatim") {
  const std::string guide = read_text(LOOM_SOURCE_DIR "/docs/adding-an-op.md");
  const std::vector<std::string> elementwise = {"ops/src/softplus.cpp", "ops/include/loom/kernels/functors.h",
                                                "ops/include/loom/kernels/elementwise_ops.h",
                                                "ops/include/loom/ops/elementwise.h"};
  const std::vector<std::string> fused = {"ops/src/bias_gelu.cpp",       "ops/include/loom/ops/kernel_signatures.h",
                                          "ops/cpu/bias_gelu.cpp",       "cuda/src/bias_gelu.cu",
                                          "cuda/src/bias_gelu_launch.h", "cuda/src/bias_gelu.cpp",
                                          "ops/include/loom/ops/fused.h"};
  // The tables of the files each kind of op touches name exactly these.
  CHECK(table_files(guide, "| file | what the op adds there |\n|---|---|\n| `ops/src/softplus") == elementwise);
  CHECK(table_files(guide, "| file | what the op adds there |\n|---|---|\n| `ops/src/bias_gelu") == fused);
  const std::string softplus_file = read_text(LOOM_SOURCE_DIR "/ops/src/softplus.cpp");
  const std::string bias_gelu_file = read_text(LOOM_SOURCE_DIR "/ops/src/bias_gelu.cpp");
  std::string others;  // the files the smaller blocks come from
  for (const auto& list : {elementwise, fused})
    for (size_t i = 1; i < list.size(); ++i) others += read_text(std::string(LOOM_SOURCE_DIR) + "/" + list[i]);
  const std::string open = "```cpp\n";
  size_t blocks = 0, whole_op_files = 0;
  for (size_t start = guide.find(open); start != std::string::npos; start = guide.find(open, start)) {
    start += open.size();
    size_t end = guide.find("```", start);
    REQUIRE(end != std::string::npos);
    const std::string block = guide.substr(start, end - start);
    ++blocks;
    if (block == softplus_file || block == bias_gelu_file)
      ++whole_op_files;
    else {
      INFO(block);
      CHECK(others.find(block) != std::string::npos);
    }
    start = end + 3;
  }
  CHECK(blocks == 9);
  CHECK(whole_op_files == 2);
}

TEST_CASE("docs/adding-an-op.md: the fused op it adds, bias_gelu, is registered, checked against its composition") {
  const OpInfo* op = find_op("bias_gelu");
  REQUIRE(op != nullptr);
  REQUIRE(op->composed != nullptr);
  std::set<std::string> checks;
  for (const auto& r : check_op(*op)) {
    INFO(describe(r));
    CHECK(r.passed);
    checks.insert(r.check);
  }
  for (const char* check : {"gradcheck", "gradgradcheck", "composed", "reference", "noncontiguous", "broadcast"}) {
    INFO(check);
    CHECK(checks.count(check) == 1);
  }
}

TEST_CASE("tolerances are the documented, fixed ones") {
  GradcheckOptions tol;
  CHECK(tol.eps == 1e-6);
  CHECK(tol.atol == 1e-5);
  CHECK(tol.rtol == 1e-3);
  CHECK(!tol.fast_mode);
}

TEST_CASE("negative control: a wrong backward formula fails gradcheck") {
  OpInfo bad{
      .name = "bad_square",
      .call = [](const OpArgs& x) { return square_with(x[0], [](const Tensor& x, const Tensor& g) { return g * x; }); },
      .samples = {unary_sample({3, 4})},
  };
  for (bool fast : {false, true}) {
    CAPTURE(fast);
    auto results = check_op(bad, {.fast_mode = fast});
    CHECK(any_failed(results, "gradcheck"));
    CHECK(any_failed(results, "noncontiguous"));
    CHECK(any_failed(results, "broadcast"));
    // The failure says where: which output, which input element, and both values.
    for (const auto& r : results)
      if (r.check == "gradcheck") CHECK(r.message.find("analytic") != std::string::npos);
  }

  OpInfo good = bad;
  good.name = "good_square";
  good.call = [](const OpArgs& x) {
    return square_with(x[0], [](const Tensor& x, const Tensor& g) { return g * x * 2.0; });
  };
  for (bool fast : {false, true})
    for (const auto& r : check_op(good, {.fast_mode = fast})) {
      INFO(describe(r));
      CHECK(r.passed);
    }
}

TEST_CASE("negative control: fast mode fails a gradient wrong in one element of twelve") {
  // 2*g*x with element 5 of the gradient off by 0.05: one Jacobian entry of 144. Fast
  // mode's rtol applies to the whole projection, so it misses an entry off by less
  // (1e-3 passes it here; the whole Jacobian catches that too).
  OpInfo off_by_one{
      .name = "one_wrong_square",
      .call =
          [](const OpArgs& x) {
            return square_with(x[0], [](const Tensor& x, const Tensor& g) {
              std::vector<double> delta(12, 0.0);
              delta[5] = 0.05;
              return g * x * 2.0 + from_vector(delta, {3, 4}, {DType::f64});
            });
          },
      .samples = {unary_sample({3, 4})},
  };
  for (bool fast : {false, true}) {
    CAPTURE(fast);
    CHECK(any_failed(check_op(off_by_one, {.fast_mode = fast}), "gradcheck"));
  }
}

TEST_CASE("negative control: a backward that is right but not differentiable fails gradgradcheck") {
  // 2*g*x with x detached: first derivatives are right, second derivatives are lost.
  OpInfo frozen{
      .name = "frozen_square",
      .call =
          [](const OpArgs& x) {
            return square_with(x[0], [](const Tensor& x, const Tensor& g) { return g * x.detach() * 2.0; });
          },
      .samples = {unary_sample({3, 4})},
  };
  for (bool fast : {false, true}) {
    CAPTURE(fast);
    auto results = check_op(frozen, {.fast_mode = fast});
    CHECK(all_passed(results, "gradcheck"));
    CHECK(any_failed(results, "gradgradcheck"));
  }
}

TEST_CASE("negative control: a kernel that ignores strides fails the non-contiguous check") {
  // Reads storage in memory order, as if every input were contiguous.
  OpInfo naive{
      .name = "stride_blind_neg",
      .call =
          [](const OpArgs& x) {
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

// ---- `loom explain`: formulas from the registration, gradcheck's own numbers ----

TEST_CASE("every registered op states its forward, derivative and shape rule for `loom explain`") {
  for (const OpInfo& op : registered_ops()) {
    INFO(op.name);
    CHECK(!op.formula.empty());
    CHECK(!op.derivative.empty());
    CHECK(!op.shape_rule.empty());
    // A differentiable op gives a formula for its derivative, not "none".
    if (op.differentiable) CHECK(op.derivative.rfind("none", 0) != 0);
  }
}

TEST_CASE("explain's Jacobians and max errors are gradcheck's, sample for sample") {
  for (const char* name : {"softmax", "mul", "layer_norm", "matmul"}) {
    const OpInfo& op = op_or_error(name);
    std::vector<CheckResult> matrix = check_op(op);
    for (size_t s : {size_t{0}, smallest_sample(op)}) {
      INFO(name << " sample " << s);
      Explanation e = explain(op, s);
      REQUIRE(e.first.has_value());
      auto row = [&](const std::string& check) {
        auto it = std::find_if(matrix.begin(), matrix.end(),
                               [&](const CheckResult& r) { return r.sample == e.sample_label && r.check == check; });
        REQUIRE(it != matrix.end());
        return *it;
      };
      CHECK(e.first->result.max_abs_error == row("gradcheck").max_abs_error);
      CHECK(e.first->result.max_rel_error == row("gradcheck").max_rel_error);
      REQUIRE(e.second.has_value());
      CHECK(e.second->result.max_abs_error == row("gradgradcheck").max_abs_error);
      // The printed matrices are the compared ones: recomputing the error from them gives the same maximum.
      double from_matrices = 0;
      for (size_t r = 0; r < e.first->analytic.size(); ++r)
        for (size_t c = 0; c < e.first->analytic[r].size(); ++c)
          from_matrices = std::max(from_matrices, std::abs(e.first->analytic[r][c] - e.first->numeric[r][c]));
      CHECK(from_matrices == e.first->result.max_abs_error);
      // Rows: every output element; columns: every differentiable input element.
      CHECK(e.first->analytic.size() == static_cast<size_t>(e.output.numel()));
    }
  }
}

TEST_CASE("explain: the Jacobian of mul is diag(b) beside diag(a), and the text shows both") {
  const OpInfo& op = op_or_error("mul");
  Explanation e = explain(op, 0);  // [4,7] * [4,7]
  auto a = e.inputs[0].to_vector<double>(), b = e.inputs[1].to_vector<double>();
  const JacobianCheck& j = *e.first;
  REQUIRE(j.columns.size() == 2);
  CHECK(j.analytic[3][3] == b[3]);
  CHECK(j.analytic[3][28 + 3] == a[3]);
  CHECK(j.analytic[3][4] == 0.0);
  std::string text = format_explanation(e);
  CHECK(text.find("da = sum_to(g·b, a.shape)") != std::string::npos);
  CHECK(text.find("analytic (backward)") != std::string::npos);
  CHECK(text.find("gradgradcheck: max abs error") != std::string::npos);
}

TEST_CASE("explain: an unknown op is an error listing the near names") {
  CHECK_THROWS_WITH_AS(op_or_error("sofmax"), doctest::Contains("did you mean softmax"), Error);
  CHECK_THROWS_WITH_AS(op_or_error("qqqqqqqqqq"), doctest::Contains("no op named 'qqqqqqqqqq'"), Error);
  std::vector<std::string> near = similar_op_names("log_sofmax");
  REQUIRE(!near.empty());
  CHECK(near[0] == "log_softmax");
  CHECK_THROWS_AS(explain(op_or_error("tanh"), 99), Error);
}

TEST_CASE("explain: a forward-only op shows its values and no Jacobian") {
  Explanation e = explain(op_or_error("argmax"), 0);
  CHECK(!e.first.has_value());
  CHECK(format_explanation(e).find("not differentiable") != std::string::npos);
}

TEST_CASE("op schema: torch's signature read into names, types and defaults") {
  const OpSchema s =
      OpSchema::parse("amax(Tensor input, int[1] dim=[], bool keepdim=False, *, float? eps=None) -> Tensor");
  CHECK(s.name == "amax");
  REQUIRE(s.parameters.size() == 4);
  CHECK(s.parameters[0].type == ArgumentType::tensor);
  CHECK_FALSE(s.parameters[0].default_value.has_value());
  CHECK(s.parameters[1].type == ArgumentType::integer_list);
  CHECK(std::get<std::vector<int64_t>>(*s.parameters[1].default_value).empty());
  CHECK(std::get<bool>(*s.parameters[2].default_value) == false);
  CHECK(s.parameters[3].keyword_only);
  CHECK(s.parameters[3].optional);
  CHECK(std::holds_alternative<std::monostate>(*s.parameters[3].default_value));
  CHECK(std::get<std::vector<int64_t>>(*OpSchema::parse("f(int[] d=[0, -1]) -> Tensor").parameters[0].default_value) ==
        std::vector<int64_t>{0, -1});
  auto refused = [](std::string_view text) {
    try {
      OpSchema::parse(text);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  CHECK(refused("f(Tensor x, long n) -> Tensor") ==
        "op schema 'f(Tensor x, long n) -> Tensor': unknown type 'long' (it knows Tensor, Tensor[], int, int[], float, "
        "bool, str)");
  CHECK(refused("f(Tensor x, bool k=0) -> Tensor") ==
        "op schema 'f(Tensor x, bool k=0) -> Tensor': '0' is not a default of type bool");
  CHECK(refused("f(int d=None) -> Tensor") ==
        "op schema 'f(int d=None) -> Tensor': argument 'd' defaults to None but its type has no '?'");
  CHECK(refused("f(int a=1, int b) -> Tensor") ==
        "op schema 'f(int a=1, int b) -> Tensor': argument 'b' without a default follows one with a default");
  CHECK(refused("f(Tensor x, Tensor x) -> Tensor") ==
        "op schema 'f(Tensor x, Tensor x) -> Tensor': argument name 'x' is empty or repeated");
  CHECK(refused("f(Tensor x)") == "op schema 'f(Tensor x)': it must return '-> Tensor' or '-> Tensor[]'");
  CHECK(OpSchema::parse("f(Tensor x, int n) -> Tensor[]").returns_list);
  CHECK(OpSchema::parse("f(Tensor x, Tensor y) -> Tensor").tensors_only());
  CHECK_FALSE(OpSchema::parse("f(Tensor x, Tensor? y=None) -> Tensor").tensors_only());
}

TEST_CASE("op schema: tensors only need no invoke; more need one; several results reach gradcheck flattened") {
  const OpInfo& exp_op = *find_op("exp");
  REQUIRE(exp_op.invoke);  // made from `call`
  const Tensor x = from_vector(std::vector<double>{0.0, 1.0}, {2}, {DType::f64});
  CHECK(std::get<Tensor>(exp_op.invoke(Arguments(*exp_op.signature, {x}))).to_vector<double>() ==
        exp(x).to_vector<double>());
  auto registering = [](std::string schema) {
    register_op({.name = "f_schema_probe",
                 .formula = "y = x",
                 .derivative = "dx = g",
                 .shape_rule = "x's",
                 .call = [](const OpArgs& a) { return a[0]; },
                 .samples = {unary_sample({2})},
                 .schema = std::move(schema)});
  };
  CHECK_THROWS_WITH(registering("f_schema_probe(Tensor input, int n) -> Tensor"),
                    "register_op: op 'f_schema_probe' needs an invoke: its schema takes more than tensors "
                    "(f_schema_probe(Tensor input, int n) -> Tensor)");
  // chunk's pieces, every element of each in order: [7, 3] in 3 chunks is the input itself.
  const OpInfo& chunk_op = *find_op("chunk");
  const auto sample = std::find_if(chunk_op.samples.begin(), chunk_op.samples.end(),
                                   [](const Sample& s) { return s.label == "3 chunks dim=0"; });
  REQUIRE(sample != chunk_op.samples.end());
  const std::vector<Tensor> input = make_inputs(chunk_op, *sample, 0);
  CHECK(sample_call(chunk_op, *sample)(input).to_vector<double>() == input[0].to_vector<double>());
}

TEST_CASE("op schema: every op with one has samples that call its invoke") {
  int with_schema = 0;
  for (const OpInfo& op : registered_ops()) {
    if (!op.signature) continue;
    ++with_schema;
    CAPTURE(op.name);
    const Parameter& first = op.signature->parameters.front();
    CHECK((first.type == ArgumentType::tensor || first.type == ArgumentType::tensor_list));
    // The test matrix runs the samples without a call of their own through invoke:
    // gradcheck and the rest check the schema's call.
    CHECK(std::any_of(op.samples.begin(), op.samples.end(), [](const Sample& s) { return !s.call; }));
  }
  CHECK(with_schema >= 60);
  // The reductions' default (dims=None, keepdim=False) is also their registered call's.
  const OpInfo& sum_op = *find_op("sum");
  const std::vector<Tensor> x = make_inputs(sum_op, sum_op.samples[0], 0);
  const Tensor by_name =
      std::get<Tensor>(sum_op.invoke(Arguments(*sum_op.signature, {x[0], std::vector<int64_t>{1}, true})));
  CHECK(by_name.shape() == Shape{4, 1});
  CHECK(by_name.to_vector<double>() == sum(x[0], {1}, true).to_vector<double>());
  CHECK_THROWS_WITH(Arguments(*sum_op.signature, {x[0], int64_t{1}, true}),
                    "sum: argument 'dim' must be int[] or None");
  CHECK_THROWS_WITH(
      Arguments(*sum_op.signature, {x[0], std::monostate{}, true}).integer("keepdim"),
      "sum: argument 'keepdim' read as another type than it holds (sum(Tensor input, int[1]? dim=None, bool "
      "keepdim=False) -> Tensor)");
}
