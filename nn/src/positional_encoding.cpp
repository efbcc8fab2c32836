#include <cmath>

#include "loom/nn/init.h"
#include "loom/nn/layers.h"
#include "loom/ops.h"

namespace loom::nn {

PositionalEncoding::PositionalEncoding(int64_t d_model, double p, int64_t max_len, Generator& gen,
                                       TensorOptions options, bool learned)
    : dropout(p, gen) {
  LOOM_CHECK(d_model > 0 && max_len > 0, "PositionalEncoding: d_model and max_len must be positive, got {} and {}",
             d_model, max_len);
  register_module("dropout", dropout);
  if (learned) {
    register_parameter("weight", table_, normal({max_len, d_model}, 1.0 / std::sqrt(double(d_model)), options, gen));
    return;
  }
  // Pairs (2k, 2k+1) share the frequency 1 / 10000^(2k / d_model).
  std::vector<double> wavelength(static_cast<size_t>(d_model));
  for (int64_t i = 0; i < d_model; ++i) wavelength[i] = std::pow(10000.0, static_cast<double>(i - i % 2) / d_model);
  std::vector<double> pe(static_cast<size_t>(max_len * d_model));
  for (int64_t pos = 0; pos < max_len; ++pos)
    for (int64_t i = 0; i < d_model; ++i) {
      const double angle = static_cast<double>(pos) / wavelength[i];
      pe[pos * d_model + i] = i % 2 == 0 ? std::sin(angle) : std::cos(angle);
    }
  register_buffer("table", table_,
                  from_vector(pe, {max_len, d_model}, {DType::f64}).to(options.dtype).to(options.device));
}

Tensor PositionalEncoding::forward(const Tensor& x, int64_t first) const {
  const int64_t max_len = table_.shape()[0], d_model = table_.shape()[1];
  LOOM_CHECK(x.dim() == 3 && x.shape()[2] == d_model,
             "PositionalEncoding: expected input [batch, time, {}], got shape {}", d_model, x.shape());
  LOOM_CHECK(first >= 0 && x.shape()[1] <= max_len - first,
             "PositionalEncoding: positions {} to {} do not fit max_len {}", first, first + x.shape()[1] - 1, max_len);
  return dropout(add(x, table_.narrow(0, first, x.shape()[1])));
}

}  // namespace loom::nn
