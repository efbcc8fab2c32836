#include "step_graphs.h"

#include "loom/autograd.h"
#include "loom/error.h"
#include "loom/ops.h"

namespace loom::models {

StepGraphs::StepGraphs(Transformer& model, std::vector<Tensor> params, Generator& gen, double label_smoothing,
                       int64_t pad_id, std::function<void(const std::string&)> message)
    : model_(model),
      params_(std::move(params)),
      gen_(gen),
      label_smoothing_(label_smoothing),
      pad_id_(pad_id),
      message_(std::move(message)),
      device_(params_.front().device()) {
  int64_t total = 0;
  for (const Tensor& p : params_) {
    LOOM_CHECK(p.dtype() == DType::f32, "--cuda-graphs: parameters must be float32, got {}", dtype_name(p.dtype()));
    total += p.numel();
  }
  grad_sums_ = zeros({total}, {DType::f32, device_});
  loss_sum_ = zeros({}, {DType::f64, device_});
  int64_t at = 0;
  for (const Tensor& p : params_) {
    grad_views_.push_back(grad_sums_.narrow(0, at, p.numel()).view(p.shape()));  // disjoint views of one buffer
    at += p.numel();
  }
  pool_ = std::make_shared<CapturePool>(device_);
}

StepGraphs::~StepGraphs() = default;

size_t StepGraphs::captured_shapes() const {
  size_t n = 0;
  for (const auto& [shape, e] : entries_) n += e.work != nullptr;
  return n;
}

void StepGraphs::begin_update() {
  NoGradGuard no_grad;
  fill_(grad_sums_, 0.0);
  fill_(loss_sum_, 0.0);
}

// Forward, loss and backward of the micro-batch in e's inputs, its gradients added into
// the sums: what is captured, and what runs eagerly where a capture failed. The eager
// trainer's arithmetic: the loss scaled by the share, loss x tokens in float64, each
// gradient added to the sum so far (0 + g is g).
void StepGraphs::run_micro_batch(Entry& e) {
  Tensor loss = label_smoothed_cross_entropy(model_.forward(e.src, e.tgt_in), e.tgt_out, label_smoothing_, pad_id_);
  {
    NoGradGuard no_grad;
    copy_(loss_sum_, add(loss_sum_, mul(to_dtype(loss.detach(), DType::f64), e.tokens)));
  }
  for (const Tensor& p : params_) p.set_grad(Tensor());
  mul(loss, to_dtype(e.share, loss.dtype())).backward();
  NoGradGuard no_grad;
  for (size_t k = 0; k < params_.size(); ++k) {
    const Tensor g = params_[k].grad();
    if (g.defined()) copy_(grad_views_[k], add(grad_views_[k], g));
    params_[k].set_grad(Tensor());
  }
}

StepGraphs::Entry& StepGraphs::entry_for(const Batch& batch) {
  const Shape3 key{batch.src.shape()[0], batch.src.shape()[1], batch.tgt_in.shape()[1]};
  auto found = entries_.find(key);
  if (found != entries_.end()) return found->second;
  Entry& e = entries_[key];
  e.src = Tensor::empty(batch.src.shape(), {DType::i64, device_});
  e.tgt_in = Tensor::empty(batch.tgt_in.shape(), {DType::i64, device_});
  e.tgt_out = Tensor::empty(batch.tgt_out.shape(), {DType::i64, device_});
  e.share = zeros({}, {DType::f64, device_});
  e.tokens = zeros({}, {DType::f64, device_});
  if (fell_back_) return e;
  // The capture's draws relative to offset 0; each replay is given the offset where it starts.
  const uint64_t at = gen_.offset();
  gen_.set_offset(0);
  try {
    e.work = capture(
        device_, [&] { run_micro_batch(e); }, pool_);
    e.offsets = gen_.offset();
  } catch (const Error& error) {
    fell_back_ = true;  // one message; later shapes run eagerly without trying
    if (message_)
      message_(fmt::format("--cuda-graphs: capturing a step of shape [{} x {} / {}] failed, so steps run eagerly: {}",
                           key[0], key[1], key[2], error.what()));
  }
  gen_.set_offset(at);
  return e;
}

void StepGraphs::add_micro_batch(const Batch& batch, double share) {
  Entry& e = entry_for(batch);
  {
    NoGradGuard no_grad;
    copy_(e.src, batch.src.to(device_));
    copy_(e.tgt_in, batch.tgt_in.to(device_));
    copy_(e.tgt_out, batch.tgt_out.to(device_));
    fill_(e.share, share);
    fill_(e.tokens, static_cast<double>(batch.tgt_tokens));
  }
  if (!e.work) return run_micro_batch(e);
  const uint64_t at = gen_.offset();
  e.work->replay(at);
  gen_.set_offset(at + e.offsets);
}

double StepGraphs::finish_update() {
  for (size_t k = 0; k < params_.size(); ++k) params_[k].set_grad(grad_views_[k]);
  return loss_sum_.to(kCPU).item<double>();
}

}  // namespace loom::models
