#pragma once
// Optimizers update parameters in place from their .grad, as PyTorch's do (the
// same formulas, so the same trajectory up to float rounding). A parameter with
// no .grad after backward is skipped. Each update is one fused pass over the
// parameter's storage, elementwise, so the bits never depend on the thread
// count; it bumps the storage version (a graph recorded before the step and
// not yet backwarded then refuses to run: loom/autograd.h).
#include <cstdint>
#include <utility>
#include <vector>

#include "loom/tensor.h"

namespace loom::optim {

class Optimizer {
 public:
  Optimizer(std::vector<Tensor> params, double lr);
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  /// One update of every parameter from its .grad.
  virtual void step() = 0;
  /// Drops every parameter's .grad (the next backward starts from zero).
  void zero_grad();

  double lr() const { return lr_; }
  void set_lr(double lr);
  int64_t steps() const { return steps_; }  // updates made so far
  const std::vector<Tensor>& params() const { return params_; }

 protected:
  /// The parameter and its gradient, checked (CPU, contiguous, float; same shape);
  /// an undefined gradient (the parameter was not used) returns false.
  bool gradient_of(size_t index, const char* optimizer, Tensor& grad) const;

  std::vector<Tensor> params_;
  double lr_;
  int64_t steps_ = 0;
};

struct SGDOptions {
  double lr = 0.1;
  double momentum = 0.0;
  double dampening = 0.0;
  double weight_decay = 0.0;  // L2: g += weight_decay * p
  bool nesterov = false;
};

/// p -= lr * g, with optional momentum (PyTorch's form: buf = momentum * buf + (1 - dampening) * g,
/// the first step buf = g) and Nesterov momentum (g + momentum * buf).
class SGD : public Optimizer {
 public:
  SGD(std::vector<Tensor> params, SGDOptions options = {});
  void step() override;

 private:
  SGDOptions options_;
  std::vector<Tensor> momentum_;  // per parameter; undefined until its first update
};

struct AdamOptions {
  double lr = 1e-3;
  std::pair<double, double> betas = {0.9, 0.999};
  double eps = 1e-8;
  double weight_decay = 0.0;
  bool decoupled_weight_decay = false;  // AdamW: p *= 1 - lr * weight_decay, apart from the gradient
};

/// Adam (Kingma & Ba), bias-corrected, as torch.optim.Adam / AdamW:
///   m = b1 m + (1 - b1) g;   v = b2 v + (1 - b2) g^2
///   p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
class Adam : public Optimizer {
 public:
  Adam(std::vector<Tensor> params, AdamOptions options = {});
  void step() override;
  const AdamOptions& options() const { return options_; }
  /// Moment estimates per parameter (undefined before its first update): for checkpoints and study.
  const std::vector<Tensor>& first_moments() const { return m_; }
  const std::vector<Tensor>& second_moments() const { return v_; }
  const std::vector<int64_t>& update_counts() const { return updates_; }  // per parameter: its t (0: not yet)
  /// Puts back a state read from those three and steps() (a resumed run continues
  /// bit for bit): one entry per parameter, a moment undefined exactly where the
  /// count is 0, else of the parameter's shape and dtype; errors name the parameter.
  void load_state(std::vector<Tensor> first, std::vector<Tensor> second, std::vector<int64_t> counts, int64_t steps);

 private:
  AdamOptions options_;
  std::vector<Tensor> m_, v_;
  std::vector<int64_t> updates_;  // per parameter: its bias-correction step t
};

/// The schedule of "Attention Is All You Need" (section 5.3):
///   lr(step) = factor * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)
/// rising linearly for `warmup` steps, then decaying as 1/sqrt(step); peak
/// factor / sqrt(d_model * warmup) at step = warmup. Call step() before each
/// optimizer step: it advances the count and sets the optimizer's lr.
/// Optionally a cool-down: over steps (start, end] the rate is scaled down
/// linearly, by (end - step + 1) / (end - start), so a run that stops at `end`
/// takes its last steps at a small rate instead of ~1/sqrt(end) of the peak
/// (a budgeted run's weights then settle, as averaging checkpoints tries to do).
class Noam {
 public:
  Noam(Optimizer& optimizer, int64_t d_model, int64_t warmup, double factor = 1.0);
  double step();
  double rate(int64_t step) const;
  int64_t current_step() const { return step_; }
  void set_current_step(int64_t step);            // a resumed run: the next step() is step + 1
  void set_cooldown(int64_t start, int64_t end);  // start == end: none (the default)

 private:
  Optimizer& optimizer_;
  int64_t d_model_, warmup_;
  double factor_;
  int64_t step_ = 0;
  int64_t cooldown_start_ = 0, cooldown_end_ = 0;
};

/// sqrt of the sum of squares of every defined .grad (float64 accumulation in
/// fixed blocks: the same for any thread count).
double grad_norm(const std::vector<Tensor>& params);
/// Scales every .grad by max_norm / norm when the norm exceeds max_norm; returns
/// the norm before clipping (watch it: spikes show instability).
double clip_grad_norm(const std::vector<Tensor>& params, double max_norm);
/// grad_norm and clip_grad_norm without reading the norm back: it stays on the
/// gradients' device (a float64 0-d tensor; undefined when no gradient is), the clip
/// factor is computed there, and the gradients get clip_grad_norm's bits. Nothing waits
/// for the device, so a captured step (loom/capture.h) can clip (torch's
/// clip_grad_norm_ likewise returns a tensor).
Tensor grad_norm_on_device(const std::vector<Tensor>& params);
Tensor clip_grad_norm_on_device(const std::vector<Tensor>& params, double max_norm);

}  // namespace loom::optim
