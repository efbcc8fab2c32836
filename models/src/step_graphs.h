#pragma once
// --cuda-graphs: an update's micro-batches through captured work (loom/capture.h). The
// first micro-batch of each shape captures forward, loss and backward, and every one
// of that shape replays it: one launch in place of each step's ~1,400 on a GPU. What a
// replay must leave behind lives outside the capture, at fixed addresses: the inputs
// (each batch copied in before its replay), its share of the update's tokens, the
// update's gradient sums (one flat buffer the captured work adds every parameter's
// gradient into) and its loss sum. So all shapes' captures share one pool for their
// temporaries. A shape whose capture fails runs the same work eagerly (with a message
// once): the same arithmetic either way, so the same losses.
#include <array>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "loom/capture.h"
#include "loom/models/data.h"
#include "loom/models/transformer.h"

namespace loom::models {

class StepGraphs {
 public:
  // The loss: label_smoothed_cross_entropy(model(src, tgt_in), tgt_out, smoothing, pad_id);
  // dropout drawn from `gen` (the model's stream). `message` reports a fallback.
  StepGraphs(Transformer& model, std::vector<Tensor> params, Generator& gen, double label_smoothing, int64_t pad_id,
             std::function<void(const std::string&)> message = {});
  ~StepGraphs();
  // An update: begin, each micro-batch (a batch already padded, on the host, and its
  // share of the update's target tokens), then finish: every parameter's .grad the sum
  // (views of one buffer) and the sum of loss x tokens read back (one wait).
  void begin_update();
  void add_micro_batch(const Batch& batch, double share);
  double finish_update();
  size_t captured_shapes() const;

 private:
  using Shape3 = std::array<int64_t, 3>;  // sentences, source length, target length
  struct Entry {
    Tensor src, tgt_in, tgt_out, share, tokens;  // written before each replay
    std::unique_ptr<CapturedWork> work;          // null: runs eagerly
    uint64_t offsets = 0;                        // dropout offsets one run draws
  };
  Entry& entry_for(const Batch& batch);
  void run_micro_batch(Entry& e);  // the captured work itself

  Transformer& model_;
  std::vector<Tensor> params_;
  Generator& gen_;
  double label_smoothing_;
  int64_t pad_id_;
  std::function<void(const std::string&)> message_;
  Device device_;
  Tensor grad_sums_, loss_sum_;  // flat float32 gradients; float64 sum of loss x tokens
  std::vector<Tensor> grad_views_;
  std::shared_ptr<CapturePool> pool_;
  std::map<Shape3, Entry> entries_;
  bool fell_back_ = false;
};

}  // namespace loom::models
