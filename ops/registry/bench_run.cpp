// The registrations' benchmark cases made runnable: `loom bench ops` times them,
// tests/test_registry runs each once.
#include <memory>

#include "loom/autograd.h"
#include "loom/ops.h"
#include "loom/bench_case.h"

namespace loom {

Tensor bench::random_ids(const Shape& shape, int64_t low, int64_t high, Generator& gen) {
  auto uniform = rand(shape, {}, gen, static_cast<double>(low), static_cast<double>(high)).to_vector<float>();
  std::vector<int64_t> ids(uniform.begin(), uniform.end());  // truncation: uniform over [low, high)
  return from_vector(ids, shape, {.dtype = DType::i64});
}

BenchRun prepare_bench(const OpInfo& op, const BenchCase& c) {
  // One seed for every case: values do not depend on which cases --filter keeps.
  auto gen = std::make_shared<Generator>(1234);
  OpArgs inputs;
  std::vector<Tensor> leaves;
  for (const BenchInput& in : c.inputs) {
    if (in.make) {
      inputs.push_back(in.make(*gen));
    } else if (is_floating(in.dtype)) {
      inputs.push_back(randn(in.shape, {.dtype = in.dtype}, *gen).requires_grad_());
      leaves.push_back(inputs.back());
    } else {
      LOOM_CHECK(in.dtype == DType::i64 && in.high > 0,
                 "bench case '{}': a non-floating input is int64 ids with a positive `high` (else give `make`)",
                 c.label);
      inputs.push_back(bench::random_ids(in.shape, 0, in.high, *gen));
    }
  }
  OpCall call = c.call ? c.call : op.call;
  BenchRun run;
  run.forward = [call, inputs] { (void)call(inputs); };
  if (!c.time_backward) return run;
  auto out = std::make_shared<Tensor>();
  auto seed = std::make_shared<Tensor>();
  run.backward = [call, inputs, leaves, gen, out, seed] {
    if (!out->defined()) {  // the first call (a warm-up) records the graph once
      *out = call(inputs);
      *seed = out->dim() == 0 ? ones({}) : randn(out->shape(), {}, *gen);
    }
    (void)grad({*out}, leaves, {*seed}, /*retain_graph=*/true);
  };
  return run;
}

}  // namespace loom
