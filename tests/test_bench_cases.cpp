// The benchmark cases (ops/bench, timed by `loom bench ops`): each builds on its real
// shapes and runs once forward and once backward, so a case that no longer fits
// its op fails here instead of in a benchmark run.
#include <doctest/doctest.h>

#include <set>

#include "loom/ops.h"
#include "loom/bench_case.h"

using namespace loom;

TEST_CASE("every registered benchmark case runs once, forward and backward") {
  std::set<std::string> labels;
  for (const OpInfo& op : registered_ops()) {
    for (const BenchCase& c : bench_cases(op.name)) {
      INFO(op.name, ": ", c.label);
      CHECK(labels.insert(c.label).second);  // the label is the join key with bench/torch_ops.py
      CHECK(c.forward_work > 0);
      CHECK(!c.formula.empty());
      CHECK(c.gemm.has_value() == (c.unit == BenchUnit::flops));  // every product gets its raw sgemm baseline
      BenchRun run;
      REQUIRE_NOTHROW(run = prepare_bench(op, c));
      CHECK_NOTHROW(run.forward());
      CHECK(static_cast<bool>(run.backward) == c.time_backward);
      if (run.backward) CHECK_NOTHROW(run.backward());
    }
  }
  // The cases `loom bench ops` had when they moved into the registrations.
  CHECK(labels.size() >= 37);
  for (const char* label :
       {"matmul 1536x512 @ 512x8000", "bmm 512x24x64 @ (512x24x64)^T", "softmax 64x8x24x24 causal mask",
        "cross_entropy 1536x8000 ls=0.1 ignore", "embedding 8000x512 [64x24 ids]"}) {
    INFO(label);
    CHECK(labels.count(label) == 1);
  }
}

TEST_CASE("every benchmark registration names a registered op, once") {
  for (const BenchRegistration& b : registered_bench()) {
    INFO(b.op);
    CHECK(find_op(b.op) != nullptr);
    CHECK(!b.cases.empty());
  }
  CHECK(registered_bench().size() >= 12);
  CHECK(bench_cases("no_such_op").empty());
  CHECK_THROWS_WITH_AS(register_bench({.op = "matmul"}), doctest::Contains("'matmul'"), Error);
}

TEST_CASE("negative control: a benchmark case that does not fit its op fails") {
  const OpInfo* add = find_op("add");
  REQUIRE(add != nullptr);
  BenchRun mismatched = prepare_bench(*add, {.label = "add 3 + 4", .inputs = {{{3}}, {{4}}}});
  CHECK_THROWS_AS(mismatched.forward(), Error);
  // A call that cuts the graph: the timed backward cannot reach the leaf.
  BenchRun detached = prepare_bench(
      *find_op("relu"),
      {.label = "relu detached", .inputs = {{{4}}}, .call = [](const OpArgs& x) { return relu(x[0].detach()); }});
  CHECK_NOTHROW(detached.forward());
  CHECK_THROWS_AS(detached.backward(), Error);
  CHECK_THROWS_AS(prepare_bench(*add, {.label = "ids without a range", .inputs = {{{3}, DType::i64}}}), Error);
}
