// decode_batches (loom/models/decode.h): whole batches per thread, for translate,
// the validation BLEU and the Python module.
#include <atomic>
#include <exception>

#include "loom/models/decode.h"

namespace loom::models {

int decode_batches(Transformer& model, size_t count, int threads, const std::function<void(size_t)>& decode) {
  return decode_batches(std::vector<Transformer*>{&model}, count, threads, decode);
}

int decode_batches(const std::vector<Transformer*>& models, size_t count, int threads,
                   const std::function<void(size_t)>& decode) {
  LOOM_CHECK(!models.empty(), "decode_batches: no model to decode with");
  PackedWeights packed(decoding_weights(models));
  nn::EvalModeGuard eval(models);
  const bool cpu = models[0]->parameters().front().device().is_cpu();
  const int workers = cpu ? static_cast<int>(std::min<size_t>(std::max(threads, 1), count)) : 1;
  if (workers <= 1) {
    for (size_t b = 0; b < count; ++b) decode(b);
    return 1;
  }
  // The first error (or interrupt) of any worker, rethrown here; only the worker that
  // sets `failed` first writes it, and the region's end orders that write before the read.
  std::exception_ptr error;
  std::atomic<bool> failed{false};
#pragma omp parallel for schedule(dynamic, 1) num_threads(workers)
  for (size_t i = 0; i < count; ++i) {
    if (failed) continue;
    try {
      decode(count - 1 - i);
    } catch (...) {
      if (!failed.exchange(true)) error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);
  return workers;
}

}  // namespace loom::models
