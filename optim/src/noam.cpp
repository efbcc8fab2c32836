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
  const double noam = factor_ / std::sqrt(static_cast<double>(d_model_)) *
                      std::min(1.0 / std::sqrt(s), s * std::pow(static_cast<double>(warmup_), -1.5));
  if (step <= cooldown_start_ || cooldown_start_ == cooldown_end_) return noam;
  const int64_t left = std::max<int64_t>(cooldown_end_ - step + 1, 1);  // past the end: the last step's rate
  return noam * (static_cast<double>(left) / static_cast<double>(cooldown_end_ - cooldown_start_));
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

void Noam::set_cooldown(int64_t start, int64_t end) {
  LOOM_CHECK(start >= 0 && end >= start, "Noam: the cool-down must run over steps 0 <= start <= end, got {} to {}",
             start, end);
  cooldown_start_ = start;
  cooldown_end_ = end;
}

}  // namespace loom::optim
