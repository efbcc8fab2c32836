#include <algorithm>
#include <cmath>

#include "loom/error.h"
#include "loom/optim/optimizer.h"

namespace loom::optim {

Noam::Noam(Optimizer& optimizer, int64_t d_model, int64_t warmup, double factor)
    : optimizer_(optimizer), d_model_(d_model), warmup_(warmup), factor_(factor) {
  LOOM_CHECK(d_model > 0 && warmup > 0 && factor > 0.0,
             "Noam: d_model, warmup and factor must be positive, got {}, {} and {}", d_model, warmup, factor);
}

double Noam::rate(int64_t step) const {
  LOOM_CHECK(step >= 1, "Noam: steps count from 1, got {}", step);
  const double s = static_cast<double>(step);
  return factor_ / std::sqrt(static_cast<double>(d_model_)) *
         std::min(1.0 / std::sqrt(s), s * std::pow(static_cast<double>(warmup_), -1.5));
}

double Noam::step() {
  const double lr = rate(++step_);
  optimizer_.set_lr(lr);
  return lr;
}

void Noam::set_current_step(int64_t step) {
  LOOM_CHECK(step >= 0, "Noam: the step count must be >= 0, got {}", step);
  step_ = step;
}

}  // namespace loom::optim
